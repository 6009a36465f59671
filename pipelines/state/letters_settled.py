"""How far the dead letters are settled: `cdckit dlq replay` records the dead-letter topic's offset
below which every letter was replayed (or had nothing left to replay), so `status`, the job's
metrics and a rerun of `bootstrap` tell letters that still stand for a failure from those a
replay dealt with. The topic keeps every letter (retention -1), so the letters themselves cannot say.

Beside the checkpoint, like everything `dlq replay` already reads there (fences, truncate cuts).
"""
from __future__ import annotations

import time
from pathlib import Path

from pipelines.state.checkpoint import CheckpointDir, read_json, write_json


def settled_offset(checkpoint_dir: Path) -> int:
    """Letters below this offset are settled (0: none is)."""
    return int((read_json(CheckpointDir(checkpoint_dir).dlq_settled) or {}).get("offset") or 0)


def record_settled(checkpoint_dir: Path, offset: int) -> None:
    write_json(CheckpointDir(checkpoint_dir).dlq_settled, {"offset": int(offset), "at": time.time()})


def pending_from(settled: int, end: int) -> int:
    """Where the unsettled letters begin: a settled offset past the topic's end means the topic
    was recreated (offsets start again at 0), so none of its letters was replayed."""
    return settled if settled <= end else 0
