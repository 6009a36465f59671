"""Which incarnation of each change topic the checkpoint's positions belong to.

Offsets alone cannot tell a recreated topic from the old one once the new log has grown past the
checkpoint's position: the pipeline would go on from the old offsets, missing the new log's start.
Kafka gives every topic a random id when it is created, so the ids are kept beside the checkpoint
(learned when a topic is first read) and compared before every batch is applied.
"""
from __future__ import annotations

from pathlib import Path

from pipelines.state.checkpoint import CheckpointDir, read_json, write_json


class TopicIds:
    def __init__(self, directory: Path):
        self.path = CheckpointDir(directory).topic_ids
        self.known: dict[str, str] = read_json(self.path, {})

    def recreated(self, current: dict[str, str]) -> list[str]:
        """Known topics now carrying another id (deleted and created again)."""
        return sorted(t for t, i in current.items() if t in self.known and self.known[t] != i)

    def learn(self, current: dict[str, str]) -> None:
        new = {t: i for t, i in current.items() if t not in self.known}
        if new:
            self.known = {**self.known, **new}
            write_json(self.path, self.known)
