"""The synced tables' column types, read from the catalog where the batch is applied.

Documents are rendered by their columns' Postgres types (connectors/typed_values.py). Each process
that applies changes (a Spark worker, the rebuild, `dlq replay`) keeps the types it read and reads
them again every `ttl_s`, and at once when a row carries a column it has not looked for since its
last read (an ADD COLUMN: its values are never rendered without their type); a column the catalog
does not have (a dropped one, in older records) is looked for once per read. A type change is seen
within `ttl_s`, and the schema watch's re-read rewrites every row after it.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Iterable

from derived.sinks.store_errors import StoreUnavailable

log = logging.getLogger("cdckit.types")
TTL_S = 5.0


class ColumnTypes:
    def __init__(self, dsn: dict[str, Any], ttl_s: float = TTL_S, clock: Callable[[], float] = time.monotonic,
                 read: Callable[[dict[str, Any], list[str]], dict[str, dict[str, str]]] | None = None):
        self.dsn, self.ttl_s, self.clock = dsn, ttl_s, clock
        self._read = read or _read_catalog
        self._types: dict[str, dict[str, str]] = {}
        self._read_at: dict[str, float] = {}
        self._absent: dict[str, set[str]] = {}   # columns rows carried that the last read did not find

    def of(self, columns_seen: dict[str, set[str]]) -> dict[str, dict[str, str]]:
        """Types of these tables (table -> the columns its rows carry). Raises StoreUnavailable when
        a table's types were never read and the database does not answer: a document rendered
        without them would be in another shape than its neighbours."""
        now = self.clock()
        stale = [t for t, cols in columns_seen.items()
                 if t not in self._types or now - self._read_at[t] >= self.ttl_s
                 or not cols <= self._types[t].keys() | self._absent[t]]
        if stale:
            try:
                fresh = self._read(self.dsn, stale)
            except Exception as exc:  # noqa: BLE001 - any failure to read: keep what was read before
                missing = [t for t in stale if t not in self._types]
                if missing:
                    raise StoreUnavailable(f"postgres: column types of {', '.join(missing)} not read: "
                                           f"{type(exc).__name__}: {str(exc)[:200]}") from exc
                log.warning("column types not read again (%s); rendering with the ones read before",
                            str(exc)[:200])
            else:
                for table in stale:
                    self._types[table] = fresh.get(table) or self._types.get(table, {})
                    self._read_at[table] = now
                    self._absent[table] = columns_seen[table] - self._types[table].keys()
        return {t: self._types[t] for t in columns_seen}

    def table(self, name: str) -> dict[str, str]:
        return self.of({name: set()})[name]


def _read_catalog(dsn: dict[str, Any], tables: Iterable[str]) -> dict[str, dict[str, str]]:
    """A table gone from the database has no types: its records (a replay of its topic) pass as
    Debezium rendered them."""
    from connectors import postgres

    with postgres.connect(dsn) as conn:
        return {t: {c.name: c.type for c in postgres.table_columns(conn, t)} for t in tables}
