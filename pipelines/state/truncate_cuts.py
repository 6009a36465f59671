"""The truncates the live pipeline has applied, kept beside its checkpoint."""
from __future__ import annotations

from pathlib import Path

from derived.change import Version
from derived.reduce import merge_cuts
from pipelines.state.checkpoint import CheckpointDir, read_json, write_json


class TruncateCuts:
    """The newest truncate per table the pipeline has applied, kept beside the checkpoint: every
    later batch drops changes older than their table's cut (see ApplyOptions.known_cuts)."""

    def __init__(self, directory: Path):
        self.path = CheckpointDir(directory).truncates
        self.known = {t: Version(*v) for t, v in read_json(self.path, {}).items()}

    def learn(self, cuts: dict) -> None:
        merged = merge_cuts(self.known, cuts)
        if merged != self.known:
            self.known = merged
            write_json(self.path, {t: list(v) for t, v in self.known.items()})
