"""The rebuild's durable state, beside the pipeline's checkpoint.

It makes a rebuild resumable (the same generations, the finished phases) and it is how the live
pipeline learns that it must also write a rebuild's fresh generations: the job reads it before
every batch (see apply_records for why that makes the switch safe). A rebuild's work folder holds
its bulk results, the bulk tasks' progress and the catch-up's checkpoint.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.state.checkpoint import CheckpointDir, RebuildWork
from pipelines.state.json_files import read_json, write_json

PHASES = ("planned", "bulk", "catchup", "switched", "done")


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


@dataclass
class RebuildState:
    """cdckit-rebuild.json: the plan (as Plan.as_json has it), the phase reached, and whether the
    live pipeline must write the fresh generations too (`dual_write`)."""

    plan: dict[str, Any]
    targets: Targets
    phase: str = "planned"
    dual_write: bool = False
    started_at: float = 0.0
    summary: dict[str, Any] = field(default_factory=dict)
    live_batch_at_switch: int | None = None   # the live pipeline's last batch when the switch happened
    switched_at: float | None = None

    def as_json(self) -> dict[str, Any]:
        body = {"plan": self.plan, "phase": self.phase, "targets": self.targets.as_json(),
                "dual_write": self.dual_write, "started_at": self.started_at, "summary": self.summary}
        if self.switched_at is not None:
            body.update(live_batch_at_switch=self.live_batch_at_switch, switched_at=self.switched_at)
        return body

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "RebuildState":
        return cls(data.get("plan") or {}, Targets.from_json(data.get("targets")), data.get("phase", "planned"),
                   bool(data.get("dual_write")), data.get("started_at", 0.0), data.get("summary") or {},
                   data.get("live_batch_at_switch"), data.get("switched_at"))


def load(checkpoint_dir: Path) -> RebuildState | None:
    data = read_json(CheckpointDir(checkpoint_dir).rebuild)
    return RebuildState.from_json(data) if data else None


def save(checkpoint_dir: Path, state: RebuildState) -> None:
    write_json(CheckpointDir(checkpoint_dir).rebuild, state.as_json(), indent=2)


def live_targets(checkpoint_dir: Path) -> Targets | None:
    """What the live pipeline must write besides its own stores: set from the catch-up phase on
    until the switch has happened."""
    state = load(checkpoint_dir)
    if not state or not state.dual_write:
        return None
    return state.targets


def work_dir(checkpoint_dir: Path, rebuild_id: str) -> RebuildWork:
    return CheckpointDir(checkpoint_dir).rebuild_work(rebuild_id)


def keep_final_copy(work: RebuildWork, state: RebuildState) -> None:
    write_json(work.state_copy, state.as_json(), indent=2)


def read_bulk(work: RebuildWork) -> dict[str, dict[str, Any]]:
    """The bulk's result rows by "topic-partition", of every run of this rebuild so far."""
    return read_json(work.bulk, {})


def write_bulk(work: RebuildWork, rows: dict[str, dict[str, Any]]) -> None:
    write_json(work.bulk, rows)


def report_progress(work: RebuildWork, topic: str, partition: int, **fields: Any) -> None:
    # Local mode shares the file system with the driver, which draws the progress bars from these.
    write_json(work.progress(topic, partition), fields)


def read_progress(work: RebuildWork) -> dict[str, dict[str, Any]]:
    found = {p.stem: read_json(p) for p in work.progress_dir.glob("*.json")}
    return {name: body for name, body in found.items() if body is not None}


def measured_rate(checkpoint_dir: Path) -> float | None:
    """Events per second the last finished rebuild measured on this machine."""
    return read_json(CheckpointDir(checkpoint_dir).rebuild_rate, {}).get("events_per_s")


def remember_rate(checkpoint_dir: Path, events_per_s: float) -> None:
    write_json(CheckpointDir(checkpoint_dir).rebuild_rate, {"events_per_s": round(events_per_s),
                                                            "measured_at": time.time()})
