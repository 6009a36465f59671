"""Unchanged TOAST columns nothing holds, read from Postgres (pipelines/apply/toast_reread.py)."""
import base64
import json
import uuid

import pytest

from derived.change import Change, Position, Version
from pipelines.apply.toast_reread import ToastReread
from tests.support.integration import pg

pytestmark = pytest.mark.integration


def change(table, key, unavailable, created=True):
    return Change(table, "upsert", key, str(key), {"n": 1}, Version(1, 1, 1), Position("t", 0, 1),
                  unavailable=unavailable, created=created)


def test_created_keys_are_filled_from_the_row_as_it_is_now(stack):
    table = f"public.toast_{uuid.uuid4().hex[:6]}"
    with pg(stack) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS hstore")
        conn.execute(f"CREATE TABLE {table} (region text, id bigint, big text, raw bytea, doc jsonb, n int, "
                     "h hstore, PRIMARY KEY (region, id))")
        conn.execute(f"INSERT INTO {table} VALUES ('eu', 9007199254740993, repeat('x', 9000), '\\x00ff', "
                     "'{\"a\": 9007199254740993}', 1, hstore('k', 'v'))")
    reread = ToastReread({"host": stack.pg_host, "port": stack.pg_port, "dbname": stack.pg_database,
                          "user": stack.pg_user})
    found = change(table, {"region": "eu", "id": 9007199254740993}, ("big", "raw", "doc", "h"))
    gone = change(table, {"region": "eu", "id": 1}, ("big",))
    updated = change(table, {"region": "eu", "id": 9007199254740993}, ("big",), created=False)
    assert reread.fill([found, gone, updated]) == 1
    assert found.unavailable == () and found.row["big"] == "x" * 9000 and found.row["n"] == 1
    assert base64.b64decode(found.row["raw"]) == b"\x00\xff" and '9007199254740993' in found.row["doc"]
    assert json.loads(found.row["h"]) == {"k": "v"}  # as Debezium's hstore.handling.mode=json sends it
    assert gone.unavailable == ("big",) and updated.unavailable == ("big",)   # left for the log and the stores
    assert reread.fill([updated], every_upsert=True) == 1 and updated.row["big"] == "x" * 9000
    reread.close()


def test_an_unreachable_database_leaves_the_placeholders(stack):
    reread = ToastReread({"host": "127.0.0.1", "port": 9, "dbname": "x", "user": "x", "connect_timeout": 2})
    c = change("public.t", {"id": 1}, ("big",))
    assert reread.fill([c]) == 0 and c.unavailable == ("big",)


def test_snapshot_reads_of_rows_with_a_bc_date_read_their_dates_again(stack):
    """Debezium's snapshot sends '0044-03-15 BC' as the day of 0044-03-15 AD: such rows are found in
    the table once per snapshot position, and their reads take the date from Postgres."""
    from connectors.debezium_values import date_days

    table = f"public.bc_{uuid.uuid4().hex[:6]}"
    with pg(stack) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, d date, e date, n int)")
        conn.execute(f"INSERT INTO {table} VALUES (1, '0044-03-15 BC', '2020-01-01', 1), (2, '0044-03-15', NULL, 2), "
                     "(3, '2020-01-01', '4713-01-01 BC', 3)")
    reread = ToastReread({"host": stack.pg_host, "port": stack.pg_port, "dbname": stack.pg_database,
                          "user": stack.pg_user})
    ad = date_days("0044-03-15")

    def read(i, d, e, lsn=10):   # as the snapshot sent them: the era gone
        return Change(table, "upsert", {"id": i}, str(i), {"id": i, "d": d, "e": e, "n": i}, Version(lsn, 0, lsn),
                      Position("t", 0, i), snapshot=True)

    reads = [read(1, ad, date_days("2020-01-01")), read(2, ad, None), read(3, date_days("2020-01-01"),
                                                                            date_days("4713-01-01"))]
    streamed = Change(table, "upsert", {"id": 1}, "1", {"id": 1, "d": ad}, Version(20, 1, 20), Position("t", 0, 9))
    assert reread.mark_snapshot_dates([*reads, streamed]) == 2
    assert reread.fill(reads) == 2
    assert reads[0].row["d"] == date_days("0044-03-15 BC") and reads[0].row["e"] == date_days("2020-01-01")
    assert reads[1].row["d"] == ad and not reads[1].reread
    assert reads[2].row["e"] == date_days("4713-01-01 BC")
    assert streamed.row["d"] == ad and not streamed.reread   # streamed changes carry the era themselves
    # A later snapshot looks again: a row that became BC since is found.
    with pg(stack) as conn:
        conn.execute(f"UPDATE {table} SET d = '0001-01-01 BC' WHERE id = 2")
    later = read(2, date_days("0001-01-01"), None, lsn=1 << 62)
    assert reread.mark_snapshot_dates([later]) == 1 and reread.fill([later]) == 1
    assert later.row["d"] == date_days("0001-01-01 BC")
    with pg(stack) as conn:
        conn.execute(f"DROP TABLE {table}")
    reread.close()
