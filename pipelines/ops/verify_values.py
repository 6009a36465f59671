"""Reading every value Postgres holds, for `verify`: each column is read as Postgres's text and
loaded one value at a time (connectors/postgres.load_as_debezium's loaders, psycopg's for the
rest), so no value stops the comparison: one that cannot be read is reported as a difference
(connectors/debezium_values.Unreadable), never raised. A column of a type Debezium leaves out of its
records (a composite, an array of money, ...: debezium_values.debezium_sends) is expected absent."""
from __future__ import annotations

from typing import Any, Callable

from connectors.debezium_values import Unreadable, debezium_sends, render

_COLUMNS = """
SELECT a.attname, bt.oid, bt.typname, bt.typtype, et.typname, et.typtype
FROM pg_attribute a
JOIN pg_type t ON t.oid = a.atttypid
JOIN pg_type bt ON bt.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
LEFT JOIN pg_type et ON et.oid = bt.typelem AND bt.typcategory = 'A'
WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum"""


class ColumnReader:
    """One table's columns: `sql()` selects them as text, `row()` loads a fetched row."""

    def __init__(self, conn, table: str):
        from psycopg import sql

        rows = conn.execute(_COLUMNS, (table,)).fetchall()
        self.table = table
        self.columns = [r[0] for r in rows]
        self.unsent = {name for name, _, typname, typtype, elem, elem_type in rows
                       if not debezium_sends(typname, typtype, elem, elem_type)}
        self.loaders = {name: text_loader(conn, oid) for name, oid, *_ in rows}
        # inet's ::text cast (text(inet)) always adds the mask ('::1/128'); its output function,
        # which Debezium's value is, leaves a host's out ('::1'): read those through concat().
        self.inet = {name for name, _, typname, *_ in rows if typname == "inet"}
        self._table_sql = sql.SQL(table)  # as the config spells it (unquoted, as every query of it)

    def sql(self, columns: list[str] | None = None):
        from psycopg import sql

        return sql.SQL("SELECT {} FROM {}").format(
            sql.SQL(", ").join((sql.SQL("CASE WHEN {0} IS NULL THEN NULL ELSE concat({0}) END") if c in self.inet
                                else sql.SQL("{}::text")).format(sql.Identifier(c)) for c in (columns or self.columns)),
            self._table_sql)

    def row(self, values, columns: list[str] | None = None) -> dict[str, Any]:
        return {c: self.load(c, v) for c, v in zip(columns or self.columns, values)}

    def load(self, column: str, text: str | None) -> Any:
        if text is None or column in self.unsent:
            return None
        loader = self.loaders.get(column)
        return loader(text) if loader is not None else text


def text_loader(conn, oid: int) -> Callable[[str], Any]:
    """The connection's text loader for this type, returning Unreadable instead of raising."""
    from psycopg.pq import Format

    cls = conn.adapters.get_loader(oid, Format.TEXT)
    if cls is None:
        return lambda text: text
    loader = cls(oid, conn)

    def load(text: str) -> Any:
        try:
            return loader.load(text.encode())
        except Exception as exc:  # noqa: BLE001 - any value psycopg or our parsers cannot read
            return Unreadable(f"unreadable {text[:80]!r}: {type(exc).__name__}: {str(exc)[:120]}")

    return load


def rendered(value: Any, pg_type: str) -> Any:
    """debezium_values.render, returning Unreadable instead of raising."""
    try:
        return render(value, pg_type)
    except Exception as exc:  # noqa: BLE001
        return Unreadable(f"unrenderable {str(value)[:80]!r}: {type(exc).__name__}: {str(exc)[:120]}")
