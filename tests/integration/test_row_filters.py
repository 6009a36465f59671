"""Row filters against Postgres itself: random rows of every filterable type, random predicates;
the rows the filter keeps, judged on the values as Debezium renders them (what the pipeline and
`verify` judge), are exactly the rows Postgres's WHERE keeps with the predicate's SQL
(derived/row_filter.store_sql, which `status` counts with). The pipeline with a filtered and
transformed table: tests/integration/test_wide_table.py (tests/support/filtered.py)."""
import datetime as dt
import uuid
from decimal import Decimal

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from connectors import postgres
from connectors.row_filter import compile_filter, node_sql, parse_filter
from pipelines.ops.verify_values import ColumnReader, rendered
from tests.support.integration import pg

pytestmark = pytest.mark.integration

COLUMNS = {"i": "integer", "n": "numeric(14,3)", "f": "double precision", "b": "boolean", "t": "text",
           "d": "date", "ts3": "timestamp(3) without time zone", "ts": "timestamp without time zone",
           "tz": "timestamp with time zone", "k": "KIND", "c": "character(4)", "r": "real", "m": "money",
           "u": "uuid"}
KINDS = ["new", "paid", "void"]

texts = st.sampled_from(["", "a", "ab", "abc", "b", "B", "é", "a b", "it's", "Z"])
dates = st.one_of(st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31)).map(str),
                  st.sampled_from(["infinity", "-infinity", "0044-03-15 BC", "10000-01-01"]))
stamps = st.one_of(st.datetimes(dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31)).map(lambda x: x.isoformat(" ")),
                   st.sampled_from(["infinity", "-infinity", "0044-03-15 10:00:00 BC", "2000-01-01 00:00:00.123456"]))
numbers = st.one_of(st.integers(-10**6, 10**6), st.decimals(-10**6, 10**6, places=3, allow_nan=False))
VALUES = {"i": st.integers(-2**31, 2**31 - 1), "n": st.one_of(numbers, st.just(Decimal("NaN"))),
          "f": st.one_of(st.floats(-1e6, 1e6), st.sampled_from([float("nan"), float("inf"), float("-inf")])),
          "b": st.booleans(), "t": texts, "d": dates, "ts3": stamps, "ts": stamps,
          "tz": stamps.map(lambda s: s if "inf" in s else s.replace(" BC", "+02 BC") if s.endswith(" BC") else s + "+02"),
          "k": st.sampled_from(KINDS), "c": texts, "r": st.floats(-1e6, 1e6, width=32),
          "m": st.decimals(-10**6, 10**6, places=2, allow_nan=False), "u": st.uuids().map(str)}
rows = st.lists(st.fixed_dictionaries({c: st.one_of(st.none(), v) for c, v in VALUES.items()}), min_size=1, max_size=25)

# Literals per column, in the language's spelling.
LITERALS = {"i": st.integers(-2**31, 2**31 - 1).map(str), "n": numbers.map(str),
            "f": st.floats(-1e6, 1e6).map(lambda x: repr(x)), "b": st.sampled_from(["true", "false"]),
            "t": texts.map(lambda s: "'" + s.replace("'", "''") + "'"),
            "d": st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31)).map(lambda x: f"'{x}'"),
            "ts3": st.datetimes(dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31)).map(lambda x: f"'{x.isoformat(' ')}'"),
            "ts": st.datetimes(dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31)).map(lambda x: f"'{x.isoformat(' ')}'"),
            "tz": st.datetimes(dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31)).map(lambda x: f"'{x.isoformat(' ')}+05'"),
            "k": st.sampled_from(KINDS).map(lambda s: f"'{s}'"), "c": texts.map(lambda s: "'" + s.replace("'", "''") + "'"),
            "r": st.floats(-1e6, 1e6).map(repr), "m": st.decimals(-10**6, 10**6, places=2, allow_nan=False).map(str),
            "u": st.uuids().map(lambda u: f"'{str(u).upper() if u.int % 2 else u}'")}


@st.composite
def leaf_tests(draw):
    col = draw(st.sampled_from(sorted(COLUMNS)))
    lit = LITERALS[col]
    ordered = col not in ("b", "k", "u")
    kind = draw(st.sampled_from(["cmp", "null", "in"] + (["starts"] if col in ("t", "k", "c") else [])
                                + (["bool", "truth"] if col == "b" else [])))
    if kind == "cmp":
        op = draw(st.sampled_from(["=", "!=", "<>", "<", "<=", ">", ">="] if ordered else ["=", "!="]))
        return f"{col} {op} {draw(lit)}"
    if kind == "null":
        return f"{col} is {draw(st.sampled_from(['', 'not ']))}null"
    if kind == "in":
        return f"{col} {draw(st.sampled_from(['', 'not ']))}in ({', '.join(draw(st.lists(lit, min_size=1, max_size=3)))})"
    if kind == "starts":
        return f"{col} starts with {draw(LITERALS['t'])}"
    if kind == "bool":
        return f"b is {draw(st.sampled_from(['', 'not ']))}{draw(st.sampled_from(['true', 'false']))}"
    return "b"


predicates = st.recursive(leaf_tests(), lambda inner: st.one_of(
    st.tuples(inner, st.sampled_from(["and", "or"]), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
    inner.map(lambda p: f"not {p}")), max_leaves=6)


@pytest.fixture(scope="module")
def table(stack):
    name = f"public.rf_{uuid.uuid4().hex[:6]}"
    kind = f"rf_kind_{uuid.uuid4().hex[:6]}"
    cols = ", ".join(f"{c} {t.replace('KIND', kind)}" for c, t in COLUMNS.items())
    with pg(stack) as conn:
        conn.execute(f"CREATE TYPE {kind} AS ENUM ('new', 'paid', 'void')")
        conn.execute(f"CREATE TABLE {name} (id int PRIMARY KEY, {cols})")
    dsn = {"host": stack.pg_host, "port": stack.pg_port, "dbname": stack.pg_database, "user": stack.pg_user}
    conn, reader = psycopg.connect(autocommit=True, **dsn), psycopg.connect(autocommit=True, **dsn)
    postgres.load_as_debezium(reader)   # values as Debezium renders them, as verify reads them
    try:
        yield conn, reader, name, postgres.column_types(conn, name)
    finally:
        conn.execute(f"DROP TABLE {name}")
        conn.execute(f"DROP TYPE {kind}")
        conn.close()
        reader.close()


@given(rows, st.lists(predicates, min_size=1, max_size=8))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_filter_keeps_exactly_the_rows_postgres_where_keeps(table, drawn_rows, drawn_predicates):
    conn, reader_conn, name, types = table
    conn.execute(f"TRUNCATE {name}")
    with conn.cursor() as cur:   # every value as Postgres's text, cast by the column
        cur.executemany(f"INSERT INTO {name} (id, {', '.join(COLUMNS)}) VALUES (%s, {', '.join(['%s'] * len(COLUMNS))})",
                        [(i, *(None if r[c] is None else str(r[c]).lower() if c == "b" else str(r[c])
                               for c in COLUMNS)) for i, r in enumerate(drawn_rows)])
    reader = ColumnReader(reader_conn, name)
    wire = [{c: rendered(v, types.get(c, "")) for c, v in reader.row(values).items()}
            for values in reader_conn.execute(reader.sql()).fetchall()]
    for text in drawn_predicates:
        keep = compile_filter(text, types)
        ours = sorted(r["id"] for r in wire if keep(r))
        theirs = sorted(i for (i,) in conn.execute(f"SELECT id FROM {name} WHERE {node_sql(parse_filter(text), types)}"))
        assert ours == theirs, (text, [r for r in wire if (r["id"] in ours) != (r["id"] in theirs)][:3])

