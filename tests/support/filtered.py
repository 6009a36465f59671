"""A filtered, transformed table beside another test's pipeline (issue #39): orders whose search
index holds paid or shipped orders over 10 that are not soft-deleted, whose cache holds every order
not soft-deleted, with a computed field and a hook's field both reading a TOASTed body, and
deleted_at left out of the index, and two Redis lookups (orders by customer; by status, scored by
amount). `FilteredOrders` creates it, gives the config entry, runs a workload that moves rows in and
out of both filters (by a TOASTed row's other columns too: it must come back whole) and between
customers, deletes, re-inserts and truncates, and compares each store and the lookups with Postgres's
WHERE."""
from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from pathlib import Path

import psycopg
import redis
import requests

from connectors.row_filter import store_sql
from tests.support.integration import pg

BIG = "(SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 300))"   # ~9,600 chars: TOASTed
WHERE = "status in ('paid', 'shipped') and amount > 10"
HOOK = "tests.support.hooks:body_length"
ROOT = Path(__file__).resolve().parents[2]   # on PYTHONPATH, so the executors import the hook


class FilteredOrders:
    def __init__(self, stack, prefix: str, redis_url: str):
        self.stack, self.p, self.table = stack, prefix, f"public.{prefix}_orders"
        self.r = redis.Redis.from_url(redis_url)
        self.stop_ = threading.Event()
        self.thread: threading.Thread | None = None
        self.errors: list[str] = []

    def create(self, rows: int = 400) -> None:
        with pg(self.stack) as conn:
            conn.execute(f"CREATE TABLE {self.table} (id int PRIMARY KEY, status text, amount numeric(10,2), "
                         "deleted_at timestamptz, body text, customer int)")
            conn.execute(f"INSERT INTO {self.table} SELECT g, (ARRAY['new','paid','shipped','void'])[1 + g % 4], "
                         f"g % 40, CASE WHEN g % 7 = 0 THEN now() END, CASE WHEN g % 5 = 0 THEN {BIG} ELSE 'short' END, "
                         f"CASE WHEN g % 9 <> 0 THEN g % 6 END FROM generate_series(1, {rows}) g")

    def config(self) -> dict:
        return {"name": self.table, "index": f"{self.p}_orders", "redis_key": f"{self.p}:{{id}}",
                "where": {"search": WHERE}, "soft_delete": {"column": "deleted_at"},
                "transform": {"fields": {"label": {"concat": ["status", {"text": "/"}, "amount"]},
                                         "head": {"upper": "body"}},
                              "remove": {"search": ["deleted_at"]}, "hook": HOOK},
                "lookups": [{"key": f"{self.p}c:{{customer}}"},
                            {"key": f"{self.p}s:{{status}}", "member": "o{id}", "score": "amount"}]}

    def start(self, truncate_after: int = 400) -> "FilteredOrders":
        self.thread = threading.Thread(target=self._run, args=(truncate_after,), daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stop_.set()
        if self.thread is not None:
            self.thread.join()
        assert not self.errors, self.errors[:3]

    def _run(self, truncate_after: int) -> None:
        rnd = random.Random(7)
        t = self.table
        with pg(self.stack) as conn:
            i = 0
            while not self.stop_.is_set():
                row_id = rnd.randint(1, 450)
                pick = rnd.random()
                try:
                    if pick < 0.35:   # status only: a TOASTed body stays unchanged, placeholders in the change
                        conn.execute(f"UPDATE {t} SET status = %s WHERE id = %s",
                                     (rnd.choice(["new", "paid", "shipped", "void"]), row_id))
                    elif pick < 0.45:
                        conn.execute(f"UPDATE {t} SET amount = %s WHERE id = %s", (rnd.randint(0, 40), row_id))
                    elif pick < 0.55:   # to another customer (or none): its lookup entry moves
                        conn.execute(f"UPDATE {t} SET customer = %s WHERE id = %s",
                                     (rnd.choice([None, 1, 2, 3, 4, 5]), row_id))
                    elif pick < 0.75:   # soft-deleted, or brought back
                        conn.execute(f"UPDATE {t} SET deleted_at = CASE WHEN deleted_at IS NULL THEN now() END "
                                     "WHERE id = %s", (row_id,))
                    elif pick < 0.85:
                        conn.execute(f"DELETE FROM {t} WHERE id = %s", (row_id,))
                    else:
                        conn.execute(f"INSERT INTO {t} VALUES (%s, 'paid', 20, NULL, {BIG}, %s) ON CONFLICT (id) DO "
                                     "UPDATE SET body = excluded.body", (row_id, row_id % 6))
                    if i == truncate_after:   # a truncate among them, and rows after it
                        conn.execute(f"TRUNCATE {t}")
                        conn.execute(f"INSERT INTO {t} SELECT g, 'shipped', 30, NULL, {BIG}, g % 3 "
                                     "FROM generate_series(1, 120) g")
                except psycopg.Error as exc:
                    self.errors.append(repr(exc))
                i += 1
                time.sleep(0.03)

    def expected(self, store: str) -> dict[int, str]:
        sql = store_sql(WHERE if store == "search" else None, ("deleted_at", None), {"deleted_at": "timestamptz"})
        with pg(self.stack) as conn:
            return dict(conn.execute(f"SELECT id, md5(body) FROM {self.table} WHERE {sql}").fetchall())

    def held(self) -> tuple[dict[int, str], dict[int, str]]:
        def digest(doc: dict) -> str:   # the body, and the fields made from it, agreeing
            assert doc["body_len"] == len(doc["body"]) and doc["head"] == doc["body"].upper(), doc["id"]
            assert doc["label"] == f"{doc['status']}/{doc['amount']}", doc
            return hashlib.md5(doc["body"].encode()).hexdigest()

        requests.post(f"{self.stack.search_url}/{self.p}_orders/_refresh", timeout=30)
        hits = requests.post(f"{self.stack.search_url}/{self.p}_orders/_search", timeout=30,
                             json={"size": 10000, "query": {"match_all": {}}}).json()["hits"]["hits"]
        assert all("deleted_at" not in h["_source"] for h in hits)
        search = {int(h["_id"]): digest(h["_source"]) for h in hits}
        cache = {}
        for k in self.r.scan_iter(match=f"{self.p}:*", count=1000):
            if not k.startswith(b"cdckit:"):
                raw = self.r.get(k)
                if raw is not None:
                    row = json.loads(raw)
                    cache[row["id"]] = digest(row)
        return search, cache

    def expected_lookups(self) -> set[tuple[str, str, float | None]]:
        """The lookups' entries of the rows the cache keeps, by Postgres's own WHERE."""
        sql = store_sql(None, ("deleted_at", None), {"deleted_at": "timestamptz"})
        with pg(self.stack) as conn:
            rows = conn.execute(f"SELECT id, customer, status, amount::float8 FROM {self.table} WHERE {sql}").fetchall()
        out = {(f"{self.p}c:{c}", str(i), None) for i, c, _, _ in rows if c is not None}
        return out | {(f"{self.p}s:{s}", f"o{i}", a) for i, _, s, a in rows if s is not None and a is not None}

    def held_lookups(self) -> set[tuple[str, str, float | None]]:
        out = set()
        for k in self.r.scan_iter(match=f"{self.p}c:*", count=1000):
            out |= {(k.decode(), m.decode(), None) for m in self.r.smembers(k)}
        for k in self.r.scan_iter(match=f"{self.p}s:*", count=1000):
            out |= {(k.decode(), m.decode(), s) for m, s in self.r.zrange(k, 0, -1, withscores=True)}
        return out

    def differences(self) -> dict[str, list]:
        search, cache = self.held()
        want_s, want_c = self.expected("search"), self.expected("cache")
        out = {s: sorted(k for k in got.keys() | want.keys() if got.get(k) != want.get(k))[:10]
               for s, got, want in (("search", search, want_s), ("cache", cache, want_c))}
        out["lookups"] = sorted(self.held_lookups() ^ self.expected_lookups(), key=str)[:10]
        return out

    def exact(self) -> bool:
        return not any(self.differences().values())
