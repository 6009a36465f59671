"""The source offsets Spark records in the streaming query's checkpoint (`query/offsets/<batch>`),
parsed in one place."""
from __future__ import annotations

import json
from pathlib import Path

from pipelines.state.checkpoint import CheckpointDir

Offsets = dict[str, dict[str, int]]


def _latest(folder: Path) -> int | None:
    ids = [int(p.name) for p in folder.glob("[0-9]*") if p.name.isdigit()]
    return max(ids) if ids else None


def batch_offsets(checkpoint_dir: Path, batch_id: int) -> Offsets:
    """The end offsets of one batch, as Spark planned them."""
    lines = (CheckpointDir(checkpoint_dir).query / "offsets" / str(batch_id)).read_text().splitlines()
    # v1 / metadata / one line per source
    return json.loads(lines[2])


def committed_batch(checkpoint_dir: Path) -> int | None:
    """The streaming query's last committed batch, if any."""
    return _latest(CheckpointDir(checkpoint_dir).query / "commits")


def committed_offsets(checkpoint_dir: Path) -> Offsets | None:
    """Source offsets up to which the pipeline has applied everything (Spark's last commit)."""
    batch = committed_batch(checkpoint_dir)
    if batch is None:
        return None
    return {t: {p: int(o) for p, o in parts.items()} for t, parts in batch_offsets(checkpoint_dir, batch).items()}


def batch_committed(checkpoint_dir: Path, batch_id: int) -> bool:
    return (CheckpointDir(checkpoint_dir).query / "commits" / str(batch_id)).exists()


def applied_offsets(checkpoint_dir: Path) -> Offsets | None:
    """Offsets up to which the stores hold every change: the streaming query's last commit or,
    before its first one, where a finished bulk bootstrap handed over to it (a `bootstrap --once`
    that applied the snapshot in bulk never runs the query)."""
    committed = committed_offsets(checkpoint_dir)
    if committed is not None:
        return committed
    from pipelines.state.bootstrap_state import handover

    return handover(checkpoint_dir)
