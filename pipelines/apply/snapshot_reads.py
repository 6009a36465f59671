"""A partition's leading snapshot reads, folded and written a chunk at a time: the bootstrap's
bulk (pipelines/bootstrap/bootstrap_bulk.py) runs it per Kafka partition, tests feed it log shapes.

A snapshot read (op=r) is the only record of its row in the snapshot, so writing chunk by chunk
loses nothing and the memory is the chunk's, not the table's. The first record that is not a read
stops it (`stopped_at`): the streaming query applies that record and everything after. A record
that cannot be decoded is dead-lettered with its reason, as the streaming query would, and the
reads go on.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from pipelines.apply.rebuild_fold import PartitionFold

CHUNK = 20_000


@dataclass
class SnapshotReads:
    key_columns: dict[str, list[str] | None]
    topic_tables: dict[str, str]
    write: Callable[[PartitionFold], None]      # a chunk's fold: its survivors and dead letters to the stores
    truncate_table: str | None = None
    chunk: int = CHUNK
    fences: dict[str, int] = field(default_factory=dict)
    reads: int = 0
    stopped_at: int | None = None
    saw_last: bool = False      # Debezium's final snapshot record (snapshot=last) was among the reads

    def __post_init__(self) -> None:
        self.fold = self._new()

    def _new(self) -> PartitionFold:
        return PartitionFold(self.key_columns, self.topic_tables, self.fences, truncate_table=self.truncate_table,
                             reads_only=True)

    def add(self, topic: str, partition: int, messages: list) -> bool:
        """The next messages of the partition, in offset order; False once stopped."""
        going = self.fold.add_messages(topic, partition, messages)
        if not going:
            self.stopped_at = self.fold.stopped_at
        elif self.fold.records >= self.chunk:
            self._flush()
        return going

    def finish(self) -> None:
        self._flush()

    def _flush(self) -> None:
        self.saw_last = self.saw_last or self.fold.snapshot_last
        self.reads += self.fold.records
        if self.fold.records or self.fold.dead:
            self.write(self.fold)
        self.fold = self._new()
