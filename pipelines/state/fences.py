"""Per-partition snapshot fences (see `version_of` in connectors/envelope.py), kept beside Spark's checkpoint.

The state after batch N is stored under N; batch N+1 starts from it. A batch re-run after a crash
starts from the same state as its first run, so it computes the same versions.
"""
from __future__ import annotations

from pathlib import Path

from pipelines.state.checkpoint import CheckpointDir, read_json, write_json

Fences = dict[str, int]  # fence_key(topic, partition) (connectors/envelope.py) -> highest snapshot lsn seen


class FenceStore:
    def __init__(self, directory: Path):
        self.path = CheckpointDir(directory).fences

    def _load(self) -> dict[str, Fences]:
        return read_json(self.path, {})

    def before(self, batch_id: int) -> Fences:
        """The fences as they stood after the newest batch older than `batch_id`."""
        older = [int(b) for b in self._load() if int(b) < batch_id]
        return dict(self._load()[str(max(older))]) if older else {}

    def save(self, batch_id: int, fences: Fences) -> None:
        state = self._load()
        state[str(batch_id)] = fences
        keep = sorted(state, key=int)[-3:]
        write_json(self.path, {b: state[b] for b in keep})
