"""Sinks in memory: the null store (a pipeline that writes only one store), a versioned store that
keeps the stores' promise for tests of the pipeline's logic (tests/integration checks the real
stores keep it), and a dead-letter sink that collects."""
from __future__ import annotations

from derived.change import DeadLetter, Version
from derived.sinks.protocol import SinkResult


class NullStore:
    """Accepts everything and keeps nothing: a store the config leaves out, so nothing counts as
    applied there (its figures in the batch lines, metrics, rebuild and replay summaries stay 0)."""

    def prepare_visible(self, prefix, definition=None) -> None:
        pass

    def make_readable(self, tables) -> None:
        pass

    def publish_visible(self, prefix, position, tables) -> None:
        pass

    def visible(self, prefix) -> int:
        return 0

    def mark(self, prefix, label, definition=None) -> None:
        pass

    def marked(self, prefix) -> bool:
        return True

    def holds(self, table) -> bool:
        return True

    def prepare(self, table) -> None:
        pass

    def begin_load(self, table) -> None:
        pass

    def end_load(self, table) -> None:
        pass

    def apply(self, changes, tables) -> SinkResult:
        return SinkResult()

    def truncate(self, change, table) -> int:
        return 0

    def count(self, table, exact: bool = False) -> int | None:
        return 0


class VersionedStore:
    """Versioned writes (a version not above the held one is stale), unchanged TOAST fields merged
    from what is held, tombstone-only deletes keeping the version just below the held one,
    truncates removing what is older than their version."""

    def __init__(self):
        self.docs = {}  # doc_id -> (version, row or None)

    def prepare(self, table) -> None:
        pass

    def begin_load(self, table) -> None:
        pass

    def end_load(self, table) -> None:
        pass

    def apply(self, changes, tables) -> SinkResult:
        stats = SinkResult()
        for ch in changes:
            held = self.docs.get(ch.doc_id)
            if ch.tombstone:
                if held is not None:
                    v = held[0]
                    self.docs[ch.doc_id] = (Version(v.epoch, v.kind, v.lsn - 1), None)
                    stats.applied += 1
                continue
            if held is not None and ch.version <= held[0]:
                stats.stale += 1
                continue
            row = None
            if ch.op == "upsert":
                kept = {c: held[1][c] for c in ch.unavailable if held and held[1] and c in held[1]}
                row = {**kept, **ch.row}
            self.docs[ch.doc_id] = (ch.version, row)
            stats.applied += 1
        return stats

    def truncate(self, change, table):
        older = [d for d, (v, row) in self.docs.items() if row is not None and v < change.version]
        for d in older:
            self.docs[d] = (change.version, None)
        return len(older)

    def rows(self):
        return {d: row for d, (_, row) in self.docs.items() if row is not None}

    def count(self, table, exact: bool = False) -> int | None:
        return len(self.rows())


class CollectedLetters:
    """A dead-letter sink that keeps the letters (`dlq replay` reports them instead of writing them back)."""

    def __init__(self) -> None:
        self.failed: list[DeadLetter] = []

    def write(self, letters) -> int:
        self.failed.extend(letters)
        return 0
