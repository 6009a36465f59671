"""What `cdckit bootstrap` records: the snapshot's watermark once the stores are consistent with
it, and the re-snapshot under way after lost topics."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.state.checkpoint import CheckpointDir
from pipelines.state.json_files import read_json, write_json


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

    def as_json(self) -> dict[str, Any]:
        body = {"completed_at": self.completed_at, "seconds": self.seconds, "snapshot_lsn": self.snapshot_lsn,
                "offsets": self.offsets, "detected_by": self.detected_by,
                "rows_at_start": self.rows_at_start, "snapshot_reads_applied": self.snapshot_reads}
        if self.removed_after_lost_topics is not None:
            body["removed_after_lost_topics"] = self.removed_after_lost_topics
        return body

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "BootstrapState":
        return cls(data.get("completed_at", 0.0), data.get("seconds", 0.0), data.get("snapshot_lsn"),
                   data.get("offsets") or {}, data.get("detected_by", ""),
                   data.get("rows_at_start") or data.get("rows") or {},   # "rows": files of cdckit before 0.2
                   data.get("snapshot_reads_applied") or data.get("snapshot_reads") or {},
                   data.get("removed_after_lost_topics"))


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
