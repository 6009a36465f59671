"""Both stores' promise, in memory, for tests of the pipeline's logic (tests/derived checks the real
stores keep it): versioned writes (a version not above the held one is stale), unchanged TOAST
fields merged from what is held, tombstone-only deletes keeping the version just below the held
one, truncates removing what is older than their version."""
from __future__ import annotations

from derived.change import Version
from derived.sinks.search.sink import SearchStats


class VersionedStore:
    def __init__(self):
        self.docs = {}  # doc_id -> (version, row or None)

    def apply(self, changes, tables):
        stats = SearchStats()
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


class NoLetters:
    def write(self, letters):
        assert not letters, [x.reason for x in letters]
        return 0
