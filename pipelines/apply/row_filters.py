"""The tables' row filters and soft deletes (connectors/row_filter.py) where changes are applied.

A row a store's filter leaves out is deleted from that store at the change's version: a row that
stops matching leaves, one that starts matching is written whole, in whatever order the changes
arrive (the versions order them). To judge a row, and to write a row that starts matching into a
store that never held it, an upsert of a filtered table needs every column: its unchanged TOAST
columns are read from Postgres first, and a batch whose read failed is retried rather than judged on
a partial row (pipelines/apply/batch.prepare). Filters are compiled against the columns' types,
read again after a DDL; a filter that no longer fits its table (a column dropped) stops the batch,
naming it.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from derived.change import Change
from connectors.row_filter import FilterError, store_predicate

STORES = ("search", "cache")
Spec = tuple[str | None, tuple[str, Any] | None]   # (where, soft delete (column, value))


class RowFilters:
    def __init__(self, specs: dict[str, dict[str, Spec]], types: Callable[[str], dict[str, str]]):
        """specs: table -> store -> (where, soft delete), only for tables with a filter;
        types: a table's column types (pipelines/apply/column_types.ColumnTypes.table)."""
        self.specs = specs
        self.types = types
        self._compiled: dict[str, tuple[dict[str, str], dict[str, Any]]] = {}

    @classmethod
    def from_config(cls, config, types: Callable[[str], dict[str, str]]) -> "RowFilters | None":
        specs = {t.name: {s: t.row_filter(s) for s in STORES} for t in config.tables if t.filtered}
        return cls(specs, types) if specs else None

    def predicates(self, table: str) -> dict[str, Any]:
        types = self.types(table)
        if not types:   # the table is gone from the database: its records are a replay, passed as they are
            return {}
        cached = self._compiled.get(table)
        if cached is None or cached[0] != types:
            try:
                compiled = {s: store_predicate(where, soft, types) for s, (where, soft) in self.specs[table].items()}
            except FilterError as exc:
                raise FilterError(f"the row filter of {table} no longer fits the table: {exc} (fix tables.where / "
                                  f"soft_delete, then `cdckit rebuild all --table {table}`)", exc.column) from None
            cached = self._compiled[table] = (dict(types), {s: p for s, p in compiled.items() if p is not None})
        return cached[1]

    def judge(self, changes: Iterable[Change]) -> int:
        """Each filtered upsert's `hidden` stores; returns how many store writes became deletes.
        Rows still missing a column are not judged: `prepare` left them out of both stores."""
        hidden = 0
        for c in changes:
            if c.op != "upsert" or c.row is None or c.table not in self.specs or c.unavailable:
                continue
            c.hidden = tuple(s for s, keep in self.predicates(c.table).items() if not keep(c.row))
            hidden += len(c.hidden)
        return hidden
