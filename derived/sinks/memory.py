"""A store that accepts everything and keeps nothing: for a pipeline that writes only one store."""
from __future__ import annotations

from derived.sinks.search.sink import SearchStats


class NullStore:
    def apply(self, changes, tables) -> SearchStats:
        return SearchStats(applied=len(list(changes)))

    def truncate(self, change, table) -> int:
        return 0

    def ensure_index(self, table) -> None:
        pass
