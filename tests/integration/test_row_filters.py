"""Row filters against Postgres itself: random rows of every filterable type, random predicates;
the rows the filter keeps, judged on the values as Debezium renders them (what the pipeline and
`verify` judge), are exactly the rows Postgres's WHERE keeps with the predicate's SQL
(derived/row_filter.store_sql, which `status` counts with)."""
import datetime as dt
import uuid
from pathlib import Path
from decimal import Decimal

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from connectors import postgres
from derived.row_filter import compile_filter, node_sql, parse_filter
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
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
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


BIG = "(SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 300))"   # ~9,600 chars: TOASTed


def test_filtered_rows_stay_exact_through_bootstrap_live_changes_and_rebuild(stack, tmp_path, monkeypatch):
    """The search index holds paid or shipped orders over 10 that are not soft-deleted; the cache
    every order not soft-deleted. Rows move in and out of both filters (by a TOASTed row's other
    columns too: it comes back whole), are deleted, re-inserted and truncated; after the bootstrap,
    the live job and `rebuild all`, each store equals Postgres's WHERE, and `verify` agrees. The
    documents carry a computed field and a hook's field (both reading the TOASTed body), and the
    search index leaves deleted_at out."""
    import json
    import random

    import redis
    import requests

    from derived.row_filter import store_sql
    from tests.support.integration import (cli, drop_pipeline, fresh_redis_dbs, start_job, stop_job, wait_for,
                                           write_config)

    p = f"rfp{uuid.uuid4().hex[:6]}"
    table = f"public.{p}_orders"
    with pg(stack) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, status text, amount numeric(10,2), "
                     "deleted_at timestamptz, body text)")
        conn.execute(f"INSERT INTO {table} SELECT g, (ARRAY['new','paid','shipped','void'])[1 + g % 4], g % 40, "
                     f"CASE WHEN g % 7 = 0 THEN now() END, CASE WHEN g % 5 = 0 THEN {BIG} ELSE 'short' END "
                     "FROM generate_series(1, 400) g")
    own = fresh_redis_dbs(stack, 9, 10)
    where = "status in ('paid', 'shipped') and amount > 10"
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))   # the hook's module, everywhere
    transform = {"fields": {"label": {"concat": ["status", {"text": "/"}, "amount"]},
                            "head": {"upper": "body"}},
                 "remove": {"search": ["deleted_at"]}, "hook": "tests.support.hooks:body_length"}
    data = stack.config(tables=[{"name": table, "index": f"{p}_orders", "redis_key": f"{p}:{{id}}",
                                 "where": {"search": where}, "soft_delete": {"column": "deleted_at"},
                                 "transform": transform}],
                        prefix=p, redis={"url": own.redis_url, "rebuild_db": 10},
                        spark={"checkpoint_dir": str(tmp_path / "ckpt"), "trigger": "500 ms"})
    path = write_config(tmp_path, data)
    r = redis.Redis.from_url(own.redis_url)
    proc = None

    def expected(store: str) -> dict[int, str]:
        sql = store_sql(*(where if store == "search" else None, ("deleted_at", None)), {"deleted_at": "timestamptz"})
        with pg(stack) as conn:
            return dict(conn.execute(f"SELECT id, md5(body) FROM {table} WHERE {sql}").fetchall())

    def held() -> tuple[dict[int, str], dict[int, str]]:
        import hashlib

        def digest(doc: dict) -> str:   # the body, and the fields made from it, agreeing
            assert doc["body_len"] == len(doc["body"]) and doc["head"] == doc["body"].upper(), doc["id"]
            assert doc["label"] == f"{doc['status']}/{doc['amount']}", doc
            return hashlib.md5(doc["body"].encode()).hexdigest()

        hits = requests.post(f"{stack.search_url}/{p}_orders/_search", timeout=30,
                             json={"size": 10000, "query": {"match_all": {}}}).json()["hits"]["hits"]
        assert all("deleted_at" not in h["_source"] for h in hits)
        search = {int(h["_id"]): digest(h["_source"]) for h in hits}
        cache = {}
        for k in r.scan_iter(match=f"{p}:*", count=1000):
            if not k.startswith(b"cdckit:"):
                row = json.loads(r.get(k))
                cache[row["id"]] = digest(row)
        return search, cache

    def exact() -> bool:
        requests.post(f"{stack.search_url}/{p}_orders/_refresh", timeout=30)
        return held() == (expected("search"), expected("cache"))

    def verified(what: str) -> None:
        result = cli("verify", "--json", "-c", str(path), "--timeout", "240", timeout=400)
        assert result.returncode == 0, (what, result.stdout[-3000:], result.stderr[-2000:])
        assert exact(), (what, held()[0].keys() ^ expected("search").keys(), held()[1].keys() ^ expected("cache").keys())

    try:
        boot = cli("bootstrap", "--once", "-c", str(path), timeout=600)
        assert boot.returncode == 0, boot.stdout[-2000:] + boot.stderr[-3000:]
        verified("after the bootstrap")
        proc = start_job(path, tmp_path / "job.log")
        rnd = random.Random(7)
        with pg(stack) as conn:
            for i in range(600):
                row_id = rnd.randint(1, 450)
                pick = rnd.random()
                if pick < 0.35:   # status only: a TOASTed body stays unchanged, placeholders in the change
                    conn.execute(f"UPDATE {table} SET status = %s WHERE id = %s",
                                 (rnd.choice(["new", "paid", "shipped", "void"]), row_id))
                elif pick < 0.55:
                    conn.execute(f"UPDATE {table} SET amount = %s WHERE id = %s", (rnd.randint(0, 40), row_id))
                elif pick < 0.75:   # soft-deleted, or brought back
                    conn.execute(f"UPDATE {table} SET deleted_at = CASE WHEN deleted_at IS NULL THEN now() END "
                                 "WHERE id = %s", (row_id,))
                elif pick < 0.85:
                    conn.execute(f"DELETE FROM {table} WHERE id = %s", (row_id,))
                else:
                    conn.execute(f"INSERT INTO {table} VALUES (%s, 'paid', 20, NULL, {BIG}) ON CONFLICT (id) DO "
                                 "UPDATE SET body = excluded.body", (row_id,))
                if i == 400:   # a truncate among them, and rows after it
                    conn.execute(f"TRUNCATE {table}")
                    conn.execute(f"INSERT INTO {table} SELECT g, 'shipped', 30, NULL, {BIG} "
                                 "FROM generate_series(1, 120) g")
        wait_for(exact, 240, 2, "the stores to equal Postgres's WHERE")
        verified("after the live changes")
        rebuilt = cli("rebuild", "all", "-c", str(path), "--json", timeout=600)
        assert rebuilt.returncode == 0, rebuilt.stdout[-2000:] + rebuilt.stderr[-3000:]
        wait_for(exact, 120, 2, "the rebuilt stores to equal Postgres's WHERE")
        verified("after rebuild all")
        # verify sees a row the filter leaves out but the store holds.
        leftout = min(set(range(1, 121)) - set(expected("search")) or {10_000})
        requests.put(f"{stack.search_url}/{p}_orders/_doc/{leftout}?refresh=true", json={"id": leftout}, timeout=10)
        bad = cli("verify", "--json", "-c", str(path), "--table", table, timeout=300)
        assert bad.returncode != 0 and json.loads(bad.stdout)["tables"][0]["stores"]["search"]["extra"], bad.stdout[-2000:]
    finally:
        stop_job(proc)
        drop_pipeline(stack, data, table)
