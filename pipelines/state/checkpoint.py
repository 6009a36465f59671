"""The checkpoint directory and every file cdckit keeps in it: the one place that names them.

Spark owns `query/` (the streaming query's checkpoint); the `cdckit-*.json` files beside it are
cdckit's own, each written and read by the module named here.
"""
from __future__ import annotations

from pathlib import Path


class CheckpointDir:
    def __init__(self, root: Path | str):
        self.root = Path(root)

    @property
    def query(self) -> Path:
        """Spark's checkpoint of the streaming query (pipelines/state/offsets.py reads it)."""
        return self.root / "query"

    @property
    def status(self) -> Path:
        """The last batch's status (pipelines/state/status.py)."""
        return self.root / "cdckit-status.json"

    @property
    def fences(self) -> Path:
        """Snapshot fences per batch (pipelines/state/fences.py)."""
        return self.root / "cdckit-fences.json"

    @property
    def topic_ids(self) -> Path:
        """The ids of the topics read (pipelines/state/topic_ids.py)."""
        return self.root / "cdckit-topic-ids.json"

    @property
    def truncates(self) -> Path:
        """The truncates applied (pipelines/state/truncate_cuts.py)."""
        return self.root / "cdckit-truncates.json"

    @property
    def bootstrap(self) -> Path:
        """The snapshot's watermark once bootstrapped (pipelines/state/bootstrap.py)."""
        return self.root / "cdckit-bootstrap.json"

    @property
    def resnapshot(self) -> Path:
        """Present while a re-snapshot after lost topics is under way (pipelines/state/bootstrap.py)."""
        return self.root / "cdckit-resnapshot.json"

    @property
    def rebuild(self) -> Path:
        """The running or last rebuild (pipelines/state/rebuild.py)."""
        return self.root / "cdckit-rebuild.json"

    @property
    def rebuild_rate(self) -> Path:
        """Events per second a finished rebuild measured (pipelines/state/rebuild.py)."""
        return self.root / "cdckit-rebuild-rate.json"

    def rebuild_work(self, rebuild_id: str) -> "RebuildWork":
        return RebuildWork(self.root / "rebuild" / rebuild_id)


class RebuildWork:
    """One rebuild's folder: its catch-up is a streaming query with a checkpoint of its own."""

    def __init__(self, root: Path | str):
        self.root = Path(root)

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def state_copy(self) -> Path:
        """The state as the rebuild finished."""
        return self.root / "state.json"

    @property
    def bulk(self) -> Path:
        """The bulk's result per partition."""
        return self.root / "bulk.json"

    @property
    def progress_dir(self) -> Path:
        return self.root / "progress"

    def progress(self, topic: str, partition: int) -> Path:
        """A bulk task's progress, which the driver draws as bars."""
        return self.progress_dir / f"{topic}-{partition}.json"

    @property
    def catchup(self) -> Path:
        """The catch-up query's checkpoint (Spark's); its fences are kept in this folder, as
        CheckpointDir names them (pipelines/state/fences.py)."""
        return self.root / "catchup"
