"""Unchanged TOAST columns that no store can fill, read again from Postgres.

Postgres logs an UPDATE's unchanged out-of-line (TOASTed) values as "unchanged", and Debezium sends
a placeholder for them. The stores fill them from the row they hold (derived/sinks/cache/sink.py, derived/sinks/search/sink.py),
and Debezium's re-select post-processor fills them at the source. Two cases are left where nothing
holds them:
- a primary-key change is sent as a delete of the old key and a create of the new one; the
  create's placeholders are re-selected by Debezium, but that query can run before the commit is
  visible to other sessions (the walsender sends a commit once it is flushed, which is before the
  committing backend has published it) and then finds no row: no store holds the new key yet;
- a rebuild folds a compacted log whose older records with the value are gone.
A column Debezium could not render (a multidimensional array: connectors/envelope.garbled_arrays)
is read here too, on every path, marked `reread`; so is a `date` of a snapshot read whose row holds a
date before year 1 (`mark_snapshot_dates`).
Such columns are read here from the row as it is now. A value newer than the change is harmless:
every later change of the column carries its full value and, being newer, overwrites it; a row
gone since (deleted, re-keyed) is left as is: its delete follows in the log.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Iterable

from connectors import postgres
from connectors.debezium_values import render
from connectors.envelope import document_id
from derived.change import Change

log = logging.getLogger("cdckit.toast")


class ToastReread:
    def __init__(self, dsn: dict[str, Any], types: Callable[[str], dict[str, str]] | None = None):
        """`types`: a table's column types (pipelines/apply/column_types.py: read again after a DDL);
        default: read once per table."""
        self.dsn = dsn
        self._conn = None
        self._types: dict[str, dict[str, str]] = {}
        self._types_of = types
        self._bc: dict[str, tuple] = {}   # table -> (WAL position, (key names, date columns), ids of BC rows)
        self.failed = False   # the last fill could not read Postgres (a row filter then cannot judge)

    def fill(self, changes: Iterable[Change], every_upsert: bool = False) -> int:
        """Fill the unavailable columns of created keys (or of every upsert: a rebuild's survivors),
        in place; returns how many changes were completed."""
        wanted = [c for c in changes if c.op == "upsert" and c.unavailable and not c.tombstone
                  and (c.created or every_upsert or c.reread)]
        self.failed = False
        if not wanted:
            return 0
        filled = 0
        try:
            conn = self._connection()
            for c in wanted:
                types = self._table_types(c.table)
                row = postgres.select_row(conn, c.table, list(c.unavailable), c.key)
                if row is None:
                    continue
                c.row = {**c.row, **{k: render(v, types.get(k, "")) for k, v in row.items()}}
                c.unavailable = ()
                filled += 1
        except Exception as exc:  # noqa: BLE001 - the database unreachable or the key not bindable
            self.failed = True
            self.close()
            log.warning("unchanged TOAST columns of %d change(s) not read from Postgres: %s",
                        len(wanted) - filled, str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__)
        return filled

    def mark_snapshot_dates(self, changes: Iterable[Change]) -> int:
        """Snapshot reads lose a BC date's era: Debezium reads a `date` through java.sql.Date, so
        '0044-03-15 BC' arrives as the day of 0044-03-15 AD (streamed changes carry it right, and
        timestamps are read as text). Nothing in the record tells the two apart, so the rows holding
        a BC date are found in the table, once per snapshot position and table (the query runs at a
        WAL position at or past the reads' snapshot: a row that was BC then and is not now has a
        streamed change after the read), and their reads re-read the date columns here (`reread`).
        Returns how many reads were marked."""
        reads = [c for c in changes if c.snapshot and c.op == "upsert" and c.row is not None and c.key]
        marked = 0
        for table in {c.table for c in reads}:
            mine = [c for c in reads if c.table == table]
            try:
                types = self._table_types(table)
                dates = sorted(col for col, t in types.items() if t == "date" and any(col in c.row for c in mine))
                if not dates:
                    continue
                names = list(mine[0].key)
                at = max(c.version.lsn for c in mine)
                cached = self._bc.get(table)
                if cached is None or cached[0] < at or cached[1] != (tuple(names), tuple(dates)):
                    cached = self._bc[table] = self._bc_rows(table, names, dates, types)
            except Exception as exc:  # noqa: BLE001 - the database unreachable: the reads keep Debezium's days
                self.close()
                log.warning("BC dates of %s's snapshot reads not looked for: %s", table, str(exc).splitlines()[0][:200]
                            if str(exc) else type(exc).__name__)
                continue
            for c in mine:
                if set(c.key) == set(names) and document_id(c.key, names) in cached[2]:
                    c.unavailable = tuple(dict.fromkeys((*c.unavailable, *dates)))
                    c.reread = True
                    marked += 1
        return marked

    def _bc_rows(self, table: str, names: list[str], dates: list[str], types: dict[str, str]):
        from psycopg import sql

        conn = self._connection()
        lsn = postgres.current_wal_lsn(conn)   # before the query: the query sees this position or later
        query = sql.SQL("SELECT {} FROM {} WHERE {}").format(
            sql.SQL(", ").join(sql.Identifier(k) for k in names),
            sql.SQL(".").join(sql.Identifier(p) for p in table.split(".", 1)),
            sql.SQL(" OR ").join(sql.SQL("{} < '0001-01-01'::date").format(sql.Identifier(d)) for d in dates))
        ids = {document_id({k: render(v, types.get(k, "")) for k, v in zip(names, row)}, names)
               for row in conn.execute(query)}
        return lsn, (tuple(names), tuple(dates)), ids

    def _table_types(self, table: str) -> dict[str, str]:
        """The table's column types: the caller's (read again after a DDL), or read here once."""
        if self._types_of is not None:
            return self._types_of(table)
        if table not in self._types:
            self._types[table] = postgres.column_types(self._connection(), table)
        return self._types[table]

    def _connection(self):
        if self._conn is None or self._conn.closed:
            import psycopg

            self._conn = psycopg.connect(autocommit=True, **self.dsn)
            # Read as Debezium sends them: json as written, hstore as JSON, intervals field by field,
            # dates and timestamps of any year (connectors/postgres.load_as_debezium).
            postgres.load_as_debezium(self._conn)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None
