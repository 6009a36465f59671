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
