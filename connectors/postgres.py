"""Postgres-side helpers: support tables, replication slot, publication and WAL position."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

import psycopg

from connectors.visibility_watermark import parse_lsn


class PostgresUnreachable(Exception):
    """The database did not let us in: unreachable, or refusing, with the config field to check."""

    exit_code = 3

    def __init__(self, endpoint: str, detail: str, what: str = "is unreachable", field: str | None = None):
        self.endpoint, self.field = endpoint, field
        super().__init__(f"PostgreSQL at {endpoint} {what}" + (f" (check {field})" if field else "")
                         + (f": {detail}" if detail else ""))


# libpq's words for each refusal -> what it means and the config fields to check.
_REFUSALS = (
    (("password authentication failed", "no password supplied", "password is required"),
     "refused the credentials", "postgres.user / postgres.password"),
    (("certificate verify failed", "root certificate file", "certificate is not yet valid", "has expired"),
     "presented a certificate the configured CA does not vouch for", "postgres.sslrootcert"),
    (("does not match host name", "server certificate for"),
     "presented a certificate for another host name", "postgres.host / postgres.sslmode"),
    (("no encryption", "server does not support SSL", "SSL off", "SSL is not enabled"),
     "refused the connection's TLS setting", "postgres.sslmode"),
)


def classify(detail: str) -> tuple[str, str | None]:
    low = detail.lower()
    for words, what, field in _REFUSALS:
        if any(w.lower() in low for w in words):
            return what, field
    return "is unreachable", None


@contextmanager
def connect(dsn: dict[str, Any], autocommit: bool = True) -> Iterator[psycopg.Connection]:
    endpoint = f"{dsn.get('host')}:{dsn.get('port')}/{dsn.get('dbname')}"
    try:
        conn = psycopg.connect(autocommit=autocommit, **dsn)
    except psycopg.OperationalError as exc:
        # The driver's message never carries the password. libpq may report one failure per
        # attempt (sslmode=prefer tries TLS, then plaintext): the line naming a refusal wins.
        lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
        detail = next((line for line in lines if classify(line)[1]), lines[0] if lines else "")
        raise PostgresUnreachable(endpoint, detail[:300], *classify(detail)) from None
    try:
        yield conn
    finally:
        conn.close()


def ensure_support_tables(conn: psycopg.Connection, heartbeat_table: str, signal_table: str,
                          truncate_table: str, tables: list[str]) -> None:
    """The heartbeat table (target of Debezium's heartbeat action query), the signal table, and
    the truncate marker table with a TRUNCATE trigger on each synced table that fills it."""
    _create_missing(conn, heartbeat_table, HEARTBEAT_COLUMNS)
    _create_missing(conn, signal_table, SIGNAL_COLUMNS)
    ensure_truncate_markers(conn, truncate_table, tables)


# The support tables' columns; connectors/sql/roles.sql creates the same (a unit test compares).
HEARTBEAT_COLUMNS = "id int PRIMARY KEY, ts timestamptz NOT NULL"
SIGNAL_COLUMNS = "id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048)"
TRUNCATE_COLUMNS = "table_name text PRIMARY KEY, truncated_at timestamptz NOT NULL"


def _create_missing(conn: psycopg.Connection, table: str, columns: str) -> None:
    # Looked up first: CREATE TABLE IF NOT EXISTS needs CREATE on the schema even when the table
    # exists, which a least-privilege role (connectors/sql/roles.sql) does not have.
    if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is None:
        conn.execute(f"CREATE TABLE IF NOT EXISTS {table} ({columns})")


# Debezium's truncate event has no key, and Kafka refuses a keyless record on a compacted topic (the
# connector task fails). Instead a statement-level trigger writes a keyed row (the table's name)
# into a captured marker table in the truncating transaction; connectors/envelope.py decodes it.
def marker_function() -> str:
    """The trigger's function, as connectors/sql/roles.sql (run by a DBA, or compose's initdb)
    creates it: one definition, read from there."""
    from importlib import resources

    text = resources.files("connectors").joinpath("sql/roles.sql").read_text()
    start = text.index("CREATE OR REPLACE FUNCTION public.cdckit_record_truncate()")
    return text[start:text.index("END $$;", start) + len("END $$")]


def marker_trigger_name(truncate_table: str) -> str:
    # One trigger per marker table: two pipelines syncing one table each get their marker.
    import hashlib

    return "cdckit_truncate_" + hashlib.sha1(truncate_table.encode()).hexdigest()[:10]


def ensure_truncate_markers(conn: psycopg.Connection, truncate_table: str, tables: list[str]) -> None:
    _create_missing(conn, truncate_table, TRUNCATE_COLUMNS)
    if not conn.execute("SELECT 1 FROM pg_proc WHERE proname = 'cdckit_record_truncate' "
                        "AND pronamespace = 'public'::regnamespace").fetchone():
        conn.execute(marker_function())
    trigger = marker_trigger_name(truncate_table)
    for table in tables:
        oid = conn.execute("SELECT to_regclass(%s)::oid", (table,)).fetchone()[0]
        if oid is None:
            continue  # not created yet: the publication step names it
        # The trigger's name stands for its marker table, so one that exists is right; creating
        # only missing ones spares a role that has not the TRIGGER privilege (the DBA added them).
        if conn.execute("SELECT 1 FROM pg_trigger WHERE tgrelid = %s AND tgname = %s", (oid, trigger)).fetchone():
            continue
        conn.execute(f"CREATE OR REPLACE TRIGGER {trigger} AFTER TRUNCATE ON {table} "
                     f"FOR EACH STATEMENT EXECUTE FUNCTION public.cdckit_record_truncate('{truncate_table}')")


@dataclass(frozen=True)
class KeyIdentity:
    """What a table's WAL records identify a row by. A delete's `before` (and an update's, for the
    old key) carries only the replica identity's columns: all of them under FULL, the primary key's
    under DEFAULT, the chosen unique index's under USING INDEX, none under NOTHING."""

    primary_key: tuple[str, ...]
    replica_identity: str                 # "default" | "full" | "index" | "nothing"
    identity_columns: tuple[str, ...]     # the old image's columns (FULL: every column)


_IDENTITY = {"d": "default", "f": "full", "i": "index", "n": "nothing"}


def key_identity(conn: psycopg.Connection, table: str) -> KeyIdentity | None:
    """The table's primary key and replica identity; None when the table does not exist."""
    row = conn.execute("SELECT to_regclass(%s)::oid", (table,)).fetchone()
    if row is None or row[0] is None:
        return None
    oid = row[0]
    kind = _IDENTITY[conn.execute("SELECT relreplident FROM pg_class WHERE oid = %s", (oid,)).fetchone()[0]]

    def index_columns(flag: str) -> tuple[str, ...]:
        return tuple(r[0] for r in conn.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
            f"AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s AND i.{flag} "
            "ORDER BY array_position(i.indkey, a.attnum)", (oid,)).fetchall())

    pk = index_columns("indisprimary")
    if kind == "full":
        columns = tuple(r[0] for r in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped "
            "ORDER BY attnum", (oid,)).fetchall())
    else:
        columns = {"default": pk, "index": index_columns("indisreplident"), "nothing": ()}[kind]
    return KeyIdentity(pk, kind, columns)


def column_types(conn: psycopg.Connection, table: str) -> dict[str, str]:
    """Column name -> type as format_type spells it (e.g. 'numeric(12,2)', 'integer[]'); a domain
    column by its base type, which is how Debezium renders its values."""
    rows = conn.execute(f"SELECT attname, {_BASE_TYPE} FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
                        "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
                        (table,)).fetchall()
    return dict(rows)


# A column's type, a domain's resolved to the type it is over.
_BASE_TYPE = ("format_type(CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE a.atttypid END, "
              "CASE WHEN t.typtype = 'd' THEN t.typtypmod ELSE a.atttypmod END)")


def load_hstore_as_dicts(conn: psycopg.Connection) -> None:
    """hstore values as dicts on this connection (psycopg reads them as text otherwise)."""
    from psycopg.types import TypeInfo
    from psycopg.types.hstore import register_hstore

    info = TypeInfo.fetch(conn, "hstore")
    if info is not None:
        register_hstore(info, conn)


def load_intervals_as_fields(conn: psycopg.Connection) -> None:
    """intervals as connectors/debezium_values.IntervalFields on this connection: a timedelta
    folds months into days and hours into days, Debezium does not."""
    from psycopg.adapt import Loader

    from connectors.debezium_values import parse_interval

    class IntervalLoader(Loader):
        def load(self, data):
            return parse_interval(bytes(data).decode())

    conn.execute("SET IntervalStyle = 'postgres'")
    conn.adapters.register_loader("interval", IntervalLoader)


def load_as_debezium(conn: psycopg.Connection) -> None:
    """Loaders on this connection that read what Debezium sends, from Postgres's text, where psycopg
    cannot hold a value or holds it otherwise (connectors/debezium_values.py): dates, timestamps and
    times of any year, infinite or 24:00:00; json as written; money, bit strings; inet, cidr, macaddr
    and ranges as text (not ipaddress or Range objects); hstore as dicts, intervals field by field.
    Element loaders serve arrays too. Sets DateStyle ISO, the output these loaders read."""
    from psycopg.adapt import Loader

    from connectors import debezium_values as dv

    def loader(parse):
        class TextLoader(Loader):
            def load(self, data):
                return parse(bytes(data).decode())

        return TextLoader

    conn.execute("SET DateStyle = 'ISO, YMD'")
    load_hstore_as_dicts(conn)
    load_intervals_as_fields(conn)
    parsers = {"date": dv.date_days, "timestamp": dv.timestamp_micros, "timestamptz": dv.zoned_text,
               "time": dv.time_micros, "timetz": dv.zoned_time, "money": dv.money_decimal, "json": dv.JsonText,
               "jsonb": dv.JsonText, "bit": dv.BitText, "varbit": dv.BitText}
    for name in ("inet", "cidr", "macaddr", "macaddr8", "int4range", "int8range", "numrange", "daterange",
                 "tsrange", "tstzrange", "int4multirange", "int8multirange", "nummultirange", "datemultirange",
                 "tsmultirange", "tstzmultirange"):
        parsers[name] = str
    for name, parse in parsers.items():
        conn.adapters.register_loader(name, loader(parse))


def table_columns(conn: psycopg.Connection, table: str) -> list:
    """The table's live columns (connectors/table_shape.Column), in column order; [] if it is gone."""
    from connectors.table_shape import Column

    oid = conn.execute("SELECT to_regclass(%s)::oid", (table,)).fetchone()[0]
    if oid is None:
        return []
    rows = conn.execute(f"SELECT attnum, attname, {_BASE_TYPE}, atthasdef FROM pg_attribute a "
                        "JOIN pg_type t ON t.oid = a.atttypid "
                        "WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped ORDER BY attnum", (oid,)).fetchall()
    return [Column(*row) for row in rows]


def select_row(conn: psycopg.Connection, table: str, columns: list[str], key: dict[str, Any]) -> dict[str, Any] | None:
    """These columns of the row with this key as it is now (None: no such row). Key values are
    bound as Debezium's key renders them (numbers, strings: Postgres casts them to the column's type)."""
    from psycopg import sql

    query = sql.SQL("SELECT {} FROM {} WHERE {}").format(
        sql.SQL(", ").join(sql.Identifier(c) for c in columns),
        sql.SQL(".").join(sql.Identifier(p) for p in table.split(".", 1)),
        sql.SQL(" AND ").join(sql.SQL("{} = {}").format(sql.Identifier(k), sql.Placeholder()) for k in key))
    row = conn.execute(query, list(key.values())).fetchone()
    return None if row is None else dict(zip(columns, row))


def current_wal_lsn(conn: psycopg.Connection) -> int:
    return lsn_to_int(conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0])


def lsn_to_int(lsn: str) -> int:
    return parse_lsn(lsn)


@dataclass
class SlotInfo:
    name: str
    active: bool
    restart_lsn: int | None
    confirmed_flush_lsn: int | None
    retained_bytes: int | None
    active_pid: int | None = None


def slot_info(conn: psycopg.Connection, slot: str) -> SlotInfo | None:
    row = conn.execute(
        "SELECT slot_name, active, restart_lsn::text, confirmed_flush_lsn::text, "
        "pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint, active_pid "
        "FROM pg_replication_slots WHERE slot_name = %s", (slot,)).fetchone()
    if row is None:
        return None
    return SlotInfo(row[0], row[1], row[2] and lsn_to_int(row[2]), row[3] and lsn_to_int(row[3]), row[4], row[5])


def drop_slot(conn: psycopg.Connection, slot: str) -> bool:
    if slot_info(conn, slot) is None:
        return False
    conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
    return True


def drop_publication(conn: psycopg.Connection, publication: str) -> None:
    conn.execute(f'DROP PUBLICATION IF EXISTS "{publication}"')


def server_version(conn: psycopg.Connection) -> int:
    """server_version_num, e.g. 150004, 180000."""
    return int(conn.execute("SHOW server_version_num").fetchone()[0])


def generated_columns(conn: psycopg.Connection, table: str) -> list[str]:
    """The table's stored generated columns (GENERATED ALWAYS AS (...) STORED), in column order; [] if
    it is gone. Before PostgreSQL 18 logical replication does not publish them (pipelines/ops/table_checks.py)."""
    return [r[0] for r in conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0 "
        "AND NOT attisdropped AND attgenerated = 's' ORDER BY attnum", (table,)).fetchall()]


# From PostgreSQL 18 a publication can publish stored generated columns; cdckit's does there.
PUBLISHES_GENERATED = 180000


def ensure_publication(conn: psycopg.Connection, publication: str, tables: list[str]) -> str:
    """The pgoutput publication for exactly these tables (on PostgreSQL 18+ with
    publish_generated_columns = stored); returns 'created', 'updated' or 'unchanged'."""
    wanted = sorted(tables)
    gencols = server_version(conn) >= PUBLISHES_GENERATED
    exists = conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (publication,)).fetchone()
    table_list = ", ".join(wanted)
    if not exists:
        conn.execute(f'CREATE PUBLICATION "{publication}" FOR TABLE {table_list}'
                     + (" WITH (publish_generated_columns = stored)" if gencols else ""))
        return "created"
    changed = False
    if gencols and conn.execute("SELECT pubgencols FROM pg_publication WHERE pubname = %s",
                                (publication,)).fetchone()[0] != "s":
        conn.execute(f'ALTER PUBLICATION "{publication}" SET (publish_generated_columns = stored)')
        changed = True
    have = sorted(f"{s}.{t}" for s, t in conn.execute(
        "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s", (publication,)).fetchall())
    if have == wanted:
        return "updated" if changed else "unchanged"
    conn.execute(f'ALTER PUBLICATION "{publication}" SET TABLE {table_list}')
    return "updated"


def request_incremental_snapshot(conn: psycopg.Connection, signal_table: str, table: str) -> str:
    """Debezium re-reads every row of `table` (an incremental snapshot, in chunks, while streaming)."""
    import json

    return send_signal(conn, signal_table, "execute-snapshot",
                       json.dumps({"data-collections": [table], "type": "incremental"}))


def snapshot_windows(conn: psycopg.Connection, signal_table: str) -> int:
    """Debezium brackets every chunk of an incremental snapshot with window-open/close rows in the
    signal table; when they stop appearing, the snapshot has read its last chunk."""
    return conn.execute(f"SELECT count(*) FROM {signal_table} "
                        "WHERE type IN ('snapshot-window-open', 'snapshot-window-close')").fetchone()[0]


def send_signal(conn: psycopg.Connection, signal_table: str, kind: str, data: str) -> str:
    """A Debezium source-channel signal (e.g. execute-snapshot); returns its id."""
    import uuid

    signal_id = uuid.uuid4().hex
    conn.execute(f"INSERT INTO {signal_table} (id, type, data) VALUES (%s, %s, %s)", (signal_id, kind, data))
    return signal_id
