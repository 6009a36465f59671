"""What `cdckit bootstrap` records: the snapshot's watermark once the stores are consistent with
it, and the re-snapshot under way after lost topics."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.state.checkpoint import CheckpointDir, read_json, write_json


@dataclass
class BootstrapState:
    """cdckit-bootstrap.json."""

    completed_at: float
    seconds: float
    snapshot_lsn: int | None
    offsets: dict[str, Any]              # the source offsets up to which the snapshot is applied
    detected_by: str                     # how the snapshot's end was recognised
    # Exact `count(*)` per table when the bootstrap began (rows written since arrive as changes).
    rows_at_start: dict[str, int]
    # Snapshot rows this run applied: fewer than the table when an earlier run applied some, or
    # when the cleaner compacted a row's snapshot record away for a later change of the row.
    snapshot_reads: dict[str, int]
    removed_after_lost_topics: dict[str, int] | None = None
    # Records dead-lettered while the snapshot was applied, per table, and the dead-letter topic's end
    # then: until a `cdckit dlq replay` has settled the letters up to it, a rerun refuses (exit 7).
    dead_letters: dict[str, int] = field(default_factory=dict)
    dead_letters_end: int | None = None

    def as_json(self) -> dict[str, Any]:
        body = {"completed_at": self.completed_at, "seconds": self.seconds, "snapshot_lsn": self.snapshot_lsn,
                "offsets": self.offsets, "detected_by": self.detected_by,
                "rows_at_start": self.rows_at_start, "snapshot_reads_applied": self.snapshot_reads}
        if self.removed_after_lost_topics is not None:
            body["removed_after_lost_topics"] = self.removed_after_lost_topics
        if self.dead_letters:
            body.update(dead_letters=self.dead_letters, dead_letters_end=self.dead_letters_end)
        return body

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "BootstrapState":
        return cls(data.get("completed_at", 0.0), data.get("seconds", 0.0), data.get("snapshot_lsn"),
                   data.get("offsets") or {}, data.get("detected_by", ""),
                   data.get("rows_at_start") or data.get("rows") or {},   # "rows": files of cdckit before 0.2
                   data.get("snapshot_reads_applied") or data.get("snapshot_reads") or {},
                   data.get("removed_after_lost_topics"), dict(data.get("dead_letters") or {}),
                   data.get("dead_letters_end"))


def state_path(checkpoint_dir: Path) -> Path:
    return CheckpointDir(checkpoint_dir).bootstrap


def read_state(checkpoint_dir: Path) -> BootstrapState | None:
    data = read_json(state_path(checkpoint_dir))
    return BootstrapState.from_json(data) if data else None


def write_state(checkpoint_dir: Path, state: BootstrapState) -> None:
    write_json(state_path(checkpoint_dir), state.as_json(), indent=2)


def mark_resnapshot(checkpoint_dir: Path, body: dict[str, Any]) -> None:
    """Remembered until the new snapshot is in, so an interrupted re-snapshot still sweeps when rerun."""
    write_json(CheckpointDir(checkpoint_dir).resnapshot, body)


def resnapshot_pending(checkpoint_dir: Path) -> bool:
    return CheckpointDir(checkpoint_dir).resnapshot.exists() and read_state(checkpoint_dir) is None


def mark_documents_sweep(checkpoint_dir: Path, snapshot_lsn: int, ends: dict[str, dict[str, int]]) -> None:
    """The re-snapshot is in for the tables: the documents are swept below `snapshot_lsn` once their
    query has applied the documents' topics up to `ends` (it runs apart from the tables' query)."""
    write_json(CheckpointDir(checkpoint_dir).documents_sweep, {"snapshot_lsn": snapshot_lsn, "ends": ends})


def documents_sweep(checkpoint_dir: Path) -> dict[str, Any] | None:
    return read_json(CheckpointDir(checkpoint_dir).documents_sweep)


def clear_documents_sweep(checkpoint_dir: Path) -> None:
    CheckpointDir(checkpoint_dir).documents_sweep.unlink(missing_ok=True)


@dataclass
class SnapshotBulk:
    """cdckit-snapshot-bulk.json: how far the bootstrap's bulk has applied each partition's snapshot
    reads (`reached`: the next offset it would read), the partitions where they ended (`stopped`:
    a change, a tombstone or an undecodable record follows; the streaming query applies it), the
    snapshot fences, reads and dead letters per table. Written after each round's writes, so a rerun resumes it;
    `done` once a round begun after Connect committed the snapshot has run. The streaming query's
    first batch then starts at `reached` (see handover). `saw_last`: Debezium's final snapshot record
    (snapshot=last) was among the reads applied."""

    reached: dict[str, dict[str, int]]
    stopped: list[str]                # fence_key(topic, partition)
    fences: dict[str, int]
    reads: dict[str, int]
    done: bool = False
    rounds: int = 0
    seconds: float = 0.0
    dead_letters: dict[str, int] = field(default_factory=dict)
    saw_last: bool = False
    unconfirmed: str | None = None   # why a bulk ended without its final record (not kept in the file)

    def as_json(self) -> dict[str, Any]:
        return {"reached": self.reached, "stopped": sorted(self.stopped), "fences": self.fences, "reads": self.reads,
                "done": self.done, "rounds": self.rounds, "seconds": self.seconds, "dead_letters": self.dead_letters,
                "saw_last": self.saw_last}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "SnapshotBulk":
        return cls({t: {str(p): int(o) for p, o in parts.items()} for t, parts in (data.get("reached") or {}).items()},
                   list(data.get("stopped") or []), dict(data.get("fences") or {}), dict(data.get("reads") or {}),
                   bool(data.get("done")), int(data.get("rounds") or 0), float(data.get("seconds") or 0.0),
                   dict(data.get("dead_letters") or {}),
                   # a bulk begun by a version without this check may have read the record already
                   bool(data.get("saw_last", int(data.get("rounds") or 0) > 0)))


def record_refresh_paused(checkpoint_dir: Path, tables: list[str]) -> None:
    """Written before a bulk load pauses these tables' index refreshes: what a crash would leave paused."""
    write_json(CheckpointDir(checkpoint_dir).refresh_paused, {"tables": sorted(tables)})


def refresh_paused(checkpoint_dir: Path) -> list[str]:
    """The tables whose index refreshes a bulk load paused and has not restored (a crash in it)."""
    return list((read_json(CheckpointDir(checkpoint_dir).refresh_paused) or {}).get("tables") or [])


def clear_refresh_paused(checkpoint_dir: Path) -> None:
    CheckpointDir(checkpoint_dir).refresh_paused.unlink(missing_ok=True)


def read_bulk(checkpoint_dir: Path) -> SnapshotBulk | None:
    data = read_json(CheckpointDir(checkpoint_dir).snapshot_bulk)
    return SnapshotBulk.from_json(data) if data else None


def write_bulk(checkpoint_dir: Path, bulk: SnapshotBulk) -> None:
    write_json(CheckpointDir(checkpoint_dir).snapshot_bulk, bulk.as_json(), indent=2)


def clear_bulk(checkpoint_dir: Path) -> None:
    CheckpointDir(checkpoint_dir).snapshot_bulk.unlink(missing_ok=True)


def handover(checkpoint_dir: Path) -> dict[str, dict[str, int]] | None:
    """Where the tables' streaming query starts when it has no checkpoint yet: after the snapshot
    reads the bootstrap's bulk applied (partitions not named: from their start)."""
    bulk = read_bulk(checkpoint_dir)
    return bulk.reached if bulk is not None and bulk.done else None
