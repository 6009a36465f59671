"""The rebuild's durable state, beside the pipeline's checkpoint.

It makes a rebuild resumable (the same generations, the finished phases) and it is how the live
pipeline learns that it must also write a rebuild's fresh generations: the job reads it before
every batch (see apply_records for why that makes the switch safe).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.apply.batch import Targets
from pipelines.state.json_files import read_json, write_json

PHASES = ("planned", "bulk", "catchup", "switched", "done")


def state_path(checkpoint_dir: Path) -> Path:
    return Path(checkpoint_dir) / "cdckit-rebuild.json"


def work_dir(checkpoint_dir: Path, rebuild_id: str) -> Path:
    return Path(checkpoint_dir) / "rebuild" / rebuild_id


def load(checkpoint_dir: Path) -> dict[str, Any] | None:
    return read_json(state_path(checkpoint_dir))


def save(checkpoint_dir: Path, state: dict[str, Any]) -> None:
    write_json(state_path(checkpoint_dir), state, indent=2)


def live_targets(checkpoint_dir: Path) -> Targets | None:
    """What the live pipeline must write besides its own stores: set from the catch-up phase on
    until the switch has happened."""
    state = load(checkpoint_dir)
    if not state or not state.get("dual_write"):
        return None
    return Targets.from_json(state.get("targets"))
