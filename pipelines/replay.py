"""Replaying one partition of a (possibly compacted) change topic into the last state of each key.

Plain Python: the rebuild's Spark job runs it once per Kafka partition (a key and its snapshot
fence live in one partition), and tests feed it the shapes a compacted log can take.

What survives is the newest upsert per key, by version. Three things take keys away:
- a delete (op=d), by version, like in the live pipeline;
- a tombstone: compaction may have removed the op=d record and left only the tombstone, so a
  tombstone removes its key's state from records at lower offsets (it is always produced right
  after the delete, so everything below it in the partition is older);
- a truncate: every key of the table whose version is below the truncate's.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from connectors.envelope import RecordError, Tombstone, document_id
from derived.change import Change, DeadLetter, Version
from derived.reduce import fold_into
from pipelines.apply_batch import decode_records


@dataclass
class PartitionFold:
    key_columns: dict[str, list[str] | None]      # every synced table -> its key columns (None: PK)
    topic_tables: dict[str, str]                  # topic -> schema.table
    fences: dict[str, int] = field(default_factory=dict)
    latest: dict[tuple[str, str], Change] = field(default_factory=dict)
    truncated: dict[str, Version] = field(default_factory=dict)
    dead: list[DeadLetter] = field(default_factory=list)
    records: int = 0
    tombstones: int = 0

    def add(self, rows: list[dict[str, Any]]) -> None:
        """Fold the next records of the partition (in offset order, chunk after chunk)."""
        self.records += len(rows)
        tombs: list[Tombstone] = []
        changes, dead, n_tombs, _ = decode_records(rows, self.fences, self.key_columns, set(self.key_columns), tombs)
        self.dead.extend(dead)
        self.tombstones += n_tombs
        truncates = fold_into(self.latest, changes)
        for t in truncates:
            if t.table not in self.truncated or t.version > self.truncated[t.table]:
                self.truncated[t.table] = t.version
        if truncates:
            self.latest = {k: c for k, c in self.latest.items() if not self._truncated(c)}
        for tomb in tombs:
            self._tombstone(tomb)

    def _truncated(self, change: Change) -> bool:
        cut = self.truncated.get(change.table)
        return cut is not None and change.version < cut

    def _tombstone(self, tomb: Tombstone) -> None:
        table = self.topic_tables.get(tomb.position.topic)
        if table is None or tomb.key is None:
            return
        try:
            doc_id = document_id(tomb.key, self.key_columns.get(table))
        except RecordError:
            return  # custom key columns not in the record key: the op=d record decides
        held = self.latest.get((table, doc_id))
        if held is not None and held.position.offset < tomb.position.offset:
            del self.latest[(table, doc_id)]

    def survivors(self) -> list[Change]:
        """The state to write into a fresh generation: upserts only (nothing there to delete)."""
        return [c for c in self.latest.values() if c.op == "upsert" and not self._truncated(c)]


def fold(rows: Iterable[dict[str, Any]], key_columns: dict[str, list[str] | None], topic_tables: dict[str, str],
         chunk: int = 20_000) -> PartitionFold:
    """Fold records of one partition given in offset order (convenience for tests and tools)."""
    f = PartitionFold(key_columns, topic_tables)
    pending: list[dict[str, Any]] = []
    for r in rows:
        pending.append(r)
        if len(pending) >= chunk:
            f.add(pending)
            pending = []
    if pending:
        f.add(pending)
    return f
