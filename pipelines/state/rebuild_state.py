"""The rebuild's durable state, beside the pipeline's checkpoint.

It makes a rebuild resumable (the same generations, the finished phases) and it is how the live
pipeline learns that it must also write a rebuild's fresh generations: the job reads it before
every batch (see apply_records for why that makes the switch safe). A rebuild's work folder holds
its bulk results and the catch-up's checkpoint (the bulk tasks' progress is in Kafka: progress_group).
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from pipelines.state.checkpoint import CheckpointDir, RebuildWork, read_json, write_json
from pipelines.state.locks import file_lock

# "refused": records of the replay were dead-lettered (more than accepted), so the fresh
# generations are dropped instead of switched; "done" follows either way.
PHASES = ("planned", "bulk", "catchup", "switched", "refused", "done")


@dataclass(frozen=True)
class Targets:
    """A rebuild's fresh generations: search indices per table and a spare Redis database."""

    search: tuple[tuple[str, str], ...] = ()   # (schema.table, concrete index)
    cache_db: int | None = None

    def __bool__(self) -> bool:
        return bool(self.search) or self.cache_db is not None

    def as_json(self) -> dict[str, Any]:
        return {"search": dict(self.search), "cache_db": self.cache_db}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "Targets":
        data = data or {}
        return cls(tuple(sorted((data.get("search") or {}).items())), data.get("cache_db"))


CATCHUP_BY_LIVE = "live"          # the live pipeline replays the catch-up stretch, then writes both
CATCHUP_BY_REBUILD = "rebuild"    # the rebuild replays it, holding the writer lock until its switch


@dataclass
class RebuildState:
    """cdckit-rebuild.json: the plan (as Plan.as_json has it), the phase reached, whether the live
    pipeline must write the fresh generations too (`dual_write`) and who replays the catch-up
    stretch (`catchup_by`, see LiveDuty)."""

    plan: dict[str, Any]
    targets: Targets
    phase: str = "planned"
    dual_write: bool = False
    started_at: float = 0.0
    summary: dict[str, Any] = field(default_factory=dict)
    live_batch_at_switch: int | None = None   # the live pipeline's last finished batch as the switch began
    switched_at: float | None = None
    catchup_by: str | None = None
    catchup_epoch: str | None = None       # one per hand-over of the catch-up (a rerun makes a new one)
    # The dead letters' verdict (pipelines/rebuild/switch_gate.py), saved before the switch begins
    # or with phase "refused": a rerun after a crash keeps to it rather than judge a half-switch again.
    dead_letters: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        body = {"plan": self.plan, "phase": self.phase, "targets": self.targets.as_json(),
                "dual_write": self.dual_write, "started_at": self.started_at, "summary": self.summary}
        if self.dead_letters is not None:
            body["dead_letters"] = self.dead_letters
        if self.catchup_by is not None:
            body.update(catchup_by=self.catchup_by, catchup_epoch=self.catchup_epoch)
        if self.switched_at is not None:
            body.update(live_batch_at_switch=self.live_batch_at_switch, switched_at=self.switched_at)
        elif self.phase == "refused":   # the batch in flight the fresh generations' drop waits for
            body["live_batch_at_switch"] = self.live_batch_at_switch
        return body

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "RebuildState":
        return cls(data.get("plan") or {}, Targets.from_json(data.get("targets")), data.get("phase", "planned"),
                   bool(data.get("dual_write")), data.get("started_at", 0.0), data.get("summary") or {},
                   data.get("live_batch_at_switch"), data.get("switched_at"), data.get("catchup_by"),
                   data.get("catchup_epoch"), data.get("dead_letters"))


def load(checkpoint_dir: Path) -> RebuildState | None:
    data = read_json(CheckpointDir(checkpoint_dir).rebuild)
    return RebuildState.from_json(data) if data else None


def save(checkpoint_dir: Path, state: RebuildState) -> None:
    write_json(CheckpointDir(checkpoint_dir).rebuild, state.as_json(), indent=2)


@dataclass(frozen=True)
class LiveDuty:
    """What a running rebuild asks of the live pipeline's next batch.

    Why one writer: a fresh generation written by two writers at once (a replay of the catch-up
    stretch and the live dual write) is only safe for changes that carry a version. A delete known
    only from its tombstone (the cleaner removed its op=d record, which a fast cleaner does for
    nearly every delete: it keeps a key's last record) deletes "whatever is held", which is right
    only when one writer applies a partition's records in offset order: another writer may write
    an older row of the key after it (the row comes back), or a newer one before it (lost).
    So the stretch from the bulk's end to the batch's end, then every batch, reach the fresh
    generation from one writer, in order: the live pipeline when it runs (it replays the stretch
    inside its next batch), else the rebuild, which holds `writer_lock` from its replay until its
    switch; a live pipeline (re)started meanwhile blocks on that lock for its batch.
    - `targets`: write these too (None: nothing to do);
    - `catch_up`: first replay [plan end, this batch's end) into the targets, then mark it done."""

    state: RebuildState
    targets: Targets | None
    catch_up: bool = False

    @property
    def rebuild_id(self) -> str:
        return str(self.state.plan.get("rebuild_id", ""))


def live_duty(checkpoint_dir: Path) -> LiveDuty | None:
    state = load(checkpoint_dir)
    if not state or not state.dual_write:
        return None
    if state.catchup_by == CATCHUP_BY_REBUILD:
        return LiveDuty(state, None)  # the rebuild's own replay (or its rerun) brings the generation up
    if state.catchup_by is None:
        return LiveDuty(state, state.targets)
    return LiveDuty(state, state.targets, catch_up=live_caught_up(checkpoint_dir, state.catchup_epoch) is None)


@contextmanager
def writer_lock(checkpoint_dir: Path) -> Iterator[None]:
    """Held by whoever writes a rebuild's fresh generation (see LiveDuty). An flock: released when
    its holder dies, so a crashed rebuild never blocks the live pipeline for good."""
    with file_lock(CheckpointDir(checkpoint_dir).rebuild_lock):
        yield


def writers_done(checkpoint_dir: Path, timeout_s: float) -> bool:
    """Once `dual_write` is off on disk: no batch of a live pipeline on this host writes the fresh
    generation any more (False: one still held the writer lock after `timeout_s`). A batch with a
    duty holds the lock from reading it to its end; one waiting for the lock reads its duty again
    once it has it (streaming/job._rebuild_duty), and finds none."""
    with file_lock(CheckpointDir(checkpoint_dir).rebuild_lock, timeout_s) as got:
        return got


def live_caught_up(checkpoint_dir: Path, epoch: str | None) -> dict[str, Any] | None:
    """The live pipeline's report of the stretch it replayed for this hand-over, once it has."""
    body = read_json(CheckpointDir(checkpoint_dir).rebuild_live) or {}
    return body if epoch and body.get("epoch") == epoch else None


def mark_live_caught_up(checkpoint_dir: Path, epoch: str, batch_id: int, totals: dict[str, Any]) -> None:
    write_json(CheckpointDir(checkpoint_dir).rebuild_live, {"epoch": epoch, "batch_id": batch_id, **totals})


def add_live_letters(checkpoint_dir: Path, epoch: str, count: int) -> None:
    """The live pipeline's dual writes after its catch-up: records the fresh generation refused
    (`dual_write_dead_letters` in its report of this hand-over; the live pipeline is its only writer)."""
    path = CheckpointDir(checkpoint_dir).rebuild_live
    body = read_json(path) or {}
    if body.get("epoch") == epoch:
        body["dual_write_dead_letters"] = int(body.get("dual_write_dead_letters") or 0) + count
        write_json(path, body)


def work_dir(checkpoint_dir: Path, rebuild_id: str) -> RebuildWork:
    return CheckpointDir(checkpoint_dir).rebuild_work(rebuild_id)


def keep_final_copy(work: RebuildWork, state: RebuildState) -> None:
    write_json(work.state_copy, state.as_json(), indent=2)


def read_bulk(work: RebuildWork) -> dict[str, dict[str, Any]]:
    """The bulk's result rows by "topic-partition", of every run of this rebuild so far."""
    return read_json(work.bulk, {})


def write_bulk(work: RebuildWork, rows: dict[str, dict[str, Any]]) -> None:
    write_json(work.bulk, rows)


def progress_group(rebuild_id: str) -> str:
    """The Kafka consumer group a rebuild's bulk tasks report their progress in
    (`ProgressBoard` in connectors/kafka/ranges.py): tasks run on any host, the driver reads it."""
    return f"cdckit-rebuild-{rebuild_id}"


def plan_partitions(end: dict[str, dict[str, Any]]) -> list[tuple[str, int]]:
    """The (topic, partition) pairs of a plan's end offsets."""
    return sorted((t, int(p)) for t, parts in end.items() for p in parts)


def progress_board(kafka_conf: dict[str, Any], rebuild_id: str):
    from connectors.kafka.ranges import ProgressBoard

    return ProgressBoard(kafka_conf, progress_group(rebuild_id))


def measured_rate(checkpoint_dir: Path) -> float | None:
    """Events per second the last finished rebuild measured on this machine."""
    return read_json(CheckpointDir(checkpoint_dir).rebuild_rate, {}).get("events_per_s")


def remember_rate(checkpoint_dir: Path, events_per_s: float) -> None:
    write_json(CheckpointDir(checkpoint_dir).rebuild_rate, {"events_per_s": round(events_per_s),
                                                            "measured_at": time.time()})


def progress_totals(checkpoint_dir: Path, read_progress: Callable[[str, list[tuple[str, int]]], dict[str, dict]]
                    ) -> tuple[bool, int, int]:
    """(unfinished, records read, records planned) of the current rebuild, for the live job's
    metrics: the bulk counts its reads per partition (`read_progress(rebuild_id, partitions)`, the
    progress board's); past the bulk every planned record is read."""
    state = load(checkpoint_dir)
    if state is None or state.phase == "done":
        return False, 0, 0
    total = int(state.plan.get("records") or 0)
    if state.phase in ("catchup", "switched", "refused"):
        return True, total, total
    rebuild_id = str(state.plan.get("rebuild_id", ""))
    progress = read_progress(rebuild_id, plan_partitions(state.plan.get("end") or {})) if rebuild_id else {}
    read = sum(int(p.get("read") or 0) for p in progress.values())
    return True, min(read, total) if total else read, total
