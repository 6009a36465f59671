"""One wide table, every change kind, three partitions, a driver killed with -9, a rebuild of both
stores under load: then both stores equal Postgres, compared here column by column from values
Postgres itself renders (not through cdckit's code), and `cdckit verify` agrees.

Columns: a composite key; bigint above 2^53; double; numeric(30,8); timestamp and timestamptz;
date; jsonb with nested numbers above 2^53; text[], int[], uuid[]; bytea; a TOASTed text and a
TOASTed bytea (STORAGE EXTERNAL: stored out of line, so unchanged ones reach Debezium as
placeholders); NULLs in every nullable column.
"""
from __future__ import annotations

import base64
import datetime as dt
import json
import os
import random
import signal
import threading
import time
import uuid
from decimal import Decimal

import psycopg
import pytest
import redis
import requests

from tests.support.filtered import ROOT as FILTERED_ROOT, FilteredOrders
from tests.support.integration import (cli, drop_connector, fresh_redis_dbs, key_history, kill_mid_batch, pg,
                                       search_docs, start_job, wait_for, wait_streaming, write_config)

pytestmark = pytest.mark.integration

LIVE_DB, SPARE_DB = 9, 10
ROWS = 1200
REGIONS = ("eu", "us", "ap")

COLUMNS = """region text NOT NULL, id bigint NOT NULL, big bigint, dbl double precision, num numeric(30,8),
ts timestamp, tstz timestamptz, d date, doc jsonb, tags text[], ints int[], uids uuid[], raw bytea,
big_text text, big_bytes bytea, n int NOT NULL DEFAULT 0, PRIMARY KEY (region, id)"""

# A row from its key: every fifth row has NULLs; the TOASTed values are ~6 kB and ~2.5 kB.
ROW_SQL = """
SELECT r, i,
  CASE WHEN i %% 5 = 0 THEN NULL ELSE 9007199254740993 + i * 7 END,
  CASE WHEN i %% 5 = 0 THEN NULL ELSE i * 0.1 + 1e-7 END,
  CASE WHEN i %% 5 = 0 THEN NULL ELSE 12345678901234567890.12345678 + i END,
  CASE WHEN i %% 5 = 0 THEN NULL ELSE timestamp '2026-01-01 12:34:56.123456' + i * interval '1.000001 s' END,
  CASE WHEN i %% 5 = 0 THEN NULL ELSE timestamptz '2026-01-01 12:34:56.654321+02' + i * interval '1 min' END,
  CASE WHEN i %% 5 = 0 THEN NULL ELSE date '2026-01-01' + (i %% 400)::int END,
  CASE WHEN i %% 5 = 0 THEN NULL ELSE jsonb_build_object('a', jsonb_build_object('big', 9007199254740993 + i,
       'f', 0.1), 'arr', jsonb_build_array(i, 'x', NULL)) END,
  CASE WHEN i %% 5 = 0 THEN NULL ELSE ARRAY['t' || i, 'with space', ''] END,
  CASE WHEN i %% 5 = 0 THEN NULL ELSE ARRAY[i::int, -1, 2147483647] END,
  CASE WHEN i %% 5 = 0 THEN NULL ELSE ARRAY[md5(i::text)::uuid] END,
  CASE WHEN i %% 5 = 0 THEN NULL ELSE decode('00ff10' || lpad(to_hex(i), 8, '0'), 'hex') END,
  CASE WHEN i %% 7 = 0 THEN NULL ELSE repeat(md5(i::text || r), 200) END,
  CASE WHEN i %% 7 = 0 THEN NULL ELSE decode(repeat(md5(r || i::text), 80), 'hex') END,
  0
FROM (SELECT %s::text AS r, %s::bigint AS i) k"""

# What the stores hold, rendered by Postgres: numbers exact, numerics and doubles as text,
# timestamps and dates as ISO-8601 text (without zone: the wall clock; with zone: the instant),
# jsonb as the object it holds.
EXPECTED_SQL = """
SELECT region, id, big, dbl::text, num::text, to_char(ts, 'YYYY-MM-DD"T"HH24:MI:SS.US'), tstz,
       to_char(d, 'YYYY-MM-DD'), doc::text, tags, ints, uids::text[], raw, big_text, big_bytes, n
FROM {table}"""
NAMES = ["region", "id", "big", "dbl", "num", "ts", "tstz", "d", "doc", "tags", "ints", "uids", "raw",
         "big_text", "big_bytes", "n"]


def _same(name: str, stored, expected) -> bool:
    try:
        return _same_value(name, stored, expected)
    except (TypeError, ValueError, AttributeError, ArithmeticError):
        return False


def _same_value(name: str, stored, expected) -> bool:
    if expected is None:
        return stored is None
    if name in ("id", "big", "n"):
        return type(stored) is int and stored == expected
    if name == "ts":  # the fraction is left out when it is zero
        return isinstance(stored, str) and dt.datetime.fromisoformat(stored) == dt.datetime.fromisoformat(expected)
    if name == "d":
        return stored == expected
    if name == "dbl":
        return isinstance(stored, (int, float)) and float(stored) == float(expected)
    if name == "num":
        return isinstance(stored, str) and Decimal(stored) == Decimal(expected)
    if name == "tstz":
        return dt.datetime.fromisoformat(stored.replace("Z", "+00:00")) == expected
    if name == "doc":
        return isinstance(stored, dict) and (json.loads(json.dumps(stored), parse_float=Decimal)
                                             == json.loads(expected, parse_float=Decimal))
    if name in ("raw", "big_bytes"):
        return isinstance(stored, str) and base64.b64decode(stored) == bytes(expected)
    return stored == expected


def _differences(want: dict, got: dict) -> list:
    out = []
    for key in sorted(set(want) | set(got)):
        if key not in got:
            out.append(("missing", key))
        elif key not in want:
            out.append(("extra", key))
        else:
            bad = [n for n in NAMES if not _same(n, got[key].get(n), want[key][n])]
            if bad or set(got[key]) != set(NAMES):
                out.append(("different", key, {n: (str(got[key].get(n))[:60], str(want[key][n])[:60]) for n in bad},
                            sorted(set(got[key]) ^ set(NAMES))))
    return out


class TopicRecorder:
    """Every record of the topic as it is produced (before the cleaner removes any), for the
    failure message: which records a differing key had."""

    def __init__(self, bootstrap: str, topic: str):
        from confluent_kafka import Consumer

        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rec{uuid.uuid4().hex[:6]}",
                           "auto.offset.reset": "earliest", "enable.auto.commit": False})
        self.c.subscribe([topic])
        self.seen: dict = {}
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop_flag.is_set():
            for m in self.c.consume(500, 0.5):
                if m.error() is not None or m.key() is None:
                    continue
                key = tuple(json.loads(m.key()).values())
                v = json.loads(m.value()) if m.value() else None
                self.seen.setdefault(key, []).append((m.partition(), m.offset(), m.timestamp()[1], v and v["op"],
                                                      v and v["source"].get("sequence"), v and v["source"].get("lsn")))

    def stop(self):
        if self.stop_flag.is_set():
            return  # stopped already (for the failure message)
        self.stop_flag.set()
        self.thread.join()
        self.c.close()


class WideWorkload:
    """Three writers: updates of non-TOAST columns (TOAST placeholders), primary-key changes,
    delete + re-insert of one key, two updates of one row in one transaction, inserts; and one
    TRUNCATE + inserts in one transaction while they run."""

    def __init__(self, stack, table: str):
        self.stack, self.table = stack, table
        self.stop_flag = threading.Event()
        self.truncate_now = threading.Event()
        self.errors: list[str] = []
        self.threads = [threading.Thread(target=self._run, args=(seed,), daemon=True) for seed in range(3)]

    def start(self) -> "WideWorkload":
        for t in self.threads:
            t.start()
        return self

    def stop(self) -> None:
        self.stop_flag.set()
        for t in self.threads:
            t.join()
        assert not self.errors, self.errors[:3]

    def _ids(self, conn, count: int = 1):
        return conn.execute(f"SELECT region, id FROM {self.table} ORDER BY random() LIMIT %s", (count,)).fetchall()

    def _run(self, seed: int) -> None:
        rnd = random.Random(seed)
        fresh = 10_000_000 * (seed + 1)
        with pg(self.stack) as conn:
            while not self.stop_flag.is_set():
                try:
                    with conn.transaction():
                        if seed == 0 and self.truncate_now.is_set():
                            self.truncate_now.clear()
                            conn.execute(f"TRUNCATE {self.table}")
                            for i in range(200):
                                conn.execute(f"INSERT INTO {self.table} {ROW_SQL}", (REGIONS[i % 3], fresh + i))
                            fresh += 200
                            continue
                        kind = rnd.randrange(5)
                        for region, i in self._ids(conn):
                            if kind == 0:    # update, TOAST untouched
                                conn.execute(f"UPDATE {self.table} SET n = n + 1, big = big + 1, dbl = dbl * 1.5, "
                                             f"ts = ts + interval '1 us' WHERE region = %s AND id = %s", (region, i))
                            elif kind == 1:  # primary-key change, TOAST untouched
                                conn.execute(f"UPDATE {self.table} SET id = %s, n = n + 1 WHERE region = %s AND id = %s",
                                             (fresh, region, i))
                                fresh += 1
                            elif kind == 2:  # delete and re-insert the same key
                                conn.execute(f"DELETE FROM {self.table} WHERE region = %s AND id = %s", (region, i))
                                conn.execute(f"INSERT INTO {self.table} {ROW_SQL}", (region, i))
                            elif kind == 3:  # two updates of one row in one transaction
                                conn.execute(f"UPDATE {self.table} SET n = n + 1, doc = doc || '{{\"k\": 1}}' "
                                             f"WHERE region = %s AND id = %s", (region, i))
                                conn.execute(f"UPDATE {self.table} SET n = n + 10, big_text = big_text || 'x' "
                                             f"WHERE region = %s AND id = %s", (region, i))
                            else:            # an update that sets the TOASTed columns to NULL or back
                                conn.execute(f"UPDATE {self.table} SET big_bytes = CASE WHEN big_bytes IS NULL THEN "
                                             f"decode(repeat('ab', 3000), 'hex') END WHERE region = %s AND id = %s",
                                             (region, i))
                        conn.execute(f"INSERT INTO {self.table} {ROW_SQL}", (REGIONS[seed], fresh))
                        fresh += 1
                except psycopg.Error as exc:
                    if not isinstance(exc, (psycopg.errors.DeadlockDetected, psycopg.errors.UniqueViolation,
                                            psycopg.errors.SerializationFailure)):
                        self.errors.append(repr(exc))
                time.sleep(0.02)


def test_wide_table_every_change_kind_then_rebuild(stack, tmp_path, monkeypatch):
    """Beside it, in the same job, a filtered and transformed table (tests/support/filtered.py):
    each store holds exactly the rows its filter keeps, with the computed and the hook's fields, and
    its Redis lookups exactly the kept rows' entries, through the same kill -9, TRUNCATE and rebuild;
    `verify` holds both tables and sees a planted index document and lookup entry."""
    name = f"wide_{uuid.uuid4().hex[:6]}"
    table = f"public.{name}"
    own = fresh_redis_dbs(stack, LIVE_DB, SPARE_DB)
    orders = FilteredOrders(stack, f"{name}f", own.redis_url)
    orders.create()
    monkeypatch.setenv("PYTHONPATH", str(FILTERED_ROOT))   # the transform hook's module, on every executor
    with pg(stack) as conn:
        conn.execute(f"CREATE TABLE {table} ({COLUMNS})")
        conn.execute(f"ALTER TABLE {table} ALTER big_text SET STORAGE EXTERNAL, ALTER big_bytes SET STORAGE EXTERNAL")
        with conn.transaction():
            for i in range(ROWS):
                conn.execute(f"INSERT INTO {table} {ROW_SQL}", (REGIONS[i % 3], i))
    # jsonb here holds mixed-type arrays ([i, 'x', NULL]): no `object` mapping takes those, a flattened one does.
    data = stack.config(tables=[{"name": table, "redis_key": f"{name}:{{region}}:{{id}}", "index": name,
                                 "search": {"json": "flattened"}}, orders.config()],
                        redis={"url": own.redis_url, "rebuild_db": SPARE_DB},
                        spark={"checkpoint_dir": str(tmp_path / "ckpt"), "trigger": "500 ms"})
    path = write_config(tmp_path, data)
    job = recorder = None
    try:
        assert cli("connector", "apply", "-c", str(path)).returncode == 0
        wait_streaming(stack, data)
        recorder = TopicRecorder(stack.bootstrap_servers, f"{data['topic_prefix']}.{table}")
        job = start_job(path, tmp_path / "job.log")
        r = redis.Redis.from_url(own.redis_url)
        wait_for(lambda: sum(1 for _ in r.scan_iter(match=f"{name}:*", count=1000)) >= ROWS, 180, 1,
                 "the snapshot applied")
        w = WideWorkload(stack, table).start()
        orders.start(truncate_after=250)
        time.sleep(4)                                       # the workload under way
        kill_mid_batch(job, tmp_path / "ckpt" / "query", tmp_path / "job.log")   # the driver dies mid-batch
        job = start_job(path, tmp_path / "job.log")
        time.sleep(4)
        w.truncate_now.set()
        time.sleep(4)
        rebuilt = cli("rebuild", "all", "-c", str(path), timeout=600)   # under load
        assert rebuilt.returncode == 0, rebuilt.stdout[-2000:] + rebuilt.stderr[-2000:]
        time.sleep(3)
        w.stop()
        orders.stop()

        def compare():
            with pg(stack) as conn:
                want = {(row[0], row[1]): dict(zip(NAMES, row)) for row in
                        conn.execute(EXPECTED_SQL.format(table=table)).fetchall()}
            # A key scanned, then deleted by the catching-up job before MGET, reads as None: skip it.
            cache = {(d["region"], d["id"]): d for d in (json.loads(v) for v in
                     r.mget(*keys) if v is not None) if d} \
                if (keys := list(r.scan_iter(match=f"{name}:*", count=1000))) else {}
            search = {(d["region"], d["id"]): d for d in search_docs(own, name).values()}
            return {"cache": _differences(want, cache), "search": _differences(want, search)}

        last = {}

        def exact():
            last.update(compare())
            return not last["cache"] and not last["search"]

        try:
            wait_for(exact, 180, 2, "both stores equal to the table")
        except TimeoutError:
            recorder.stop()
            keys = {tuple(d[1]) for v in last.values() for d in v[:3]}
            raise AssertionError({k: (len(v), v[:5]) for k, v in last.items()}, {k: recorder.seen.get(k) for k in keys},
                                 _stored_versions(own, name, keys), _history(stack, data, table, last),
                                 rebuilt.stdout[-1500:], _rebuild_times(tmp_path / "ckpt")) from None
        wait_for(orders.exact, 120, 2, "the filtered table's stores to equal Postgres's WHERE")
        verify = cli("verify", "--json", "-c", str(path), timeout=300)
        assert verify.returncode == 0, verify.stdout[-3000:]
        # verify sees a row the filter leaves out but the index holds.
        kept = orders.expected("search")
        left_out = next(i for i in range(1, 10_000) if i not in kept)
        requests.put(f"{stack.search_url}/{orders.p}_orders/_doc/{left_out}?refresh=true", json={"id": left_out},
                     timeout=10)
        r.sadd(f"{orders.p}c:2", "99999")   # and a lookup entry no row gives
        bad = cli("verify", "--json", "-c", str(path), "--table", orders.table, timeout=300)
        stores = json.loads(bad.stdout)["tables"][0]["stores"]
        assert bad.returncode != 0 and stores["search"]["extra"], bad.stdout[-2000:]
        assert stores["cache"]["extra"] == [f"{orders.p}c:2 member 99999"], bad.stdout[-2000:]
    finally:
        orders.stop_.set()
        if recorder is not None:  # its consumer, left open, was the reconnect lines after the suite
            recorder.stop()
        if job is not None and job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
        drop_connector(stack, data)
        with pg(stack) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {orders.table}")


def _rebuild_times(ckpt) -> dict:
    """When the rebuild began and switched (to set beside the records' timestamps)."""
    state = json.loads((ckpt / "cdckit-rebuild.json").read_text())
    return {k: state.get(k) for k in ("started_at", "switched_at", "live_batch_at_switch", "summary")}


def _history(stack, data, table, last) -> list:
    """The change records of the first differing keys and Connect's re-select warnings, to see why."""
    keys = {tuple(d[1]) for v in last.values() for d in v[:3]}
    history = key_history(stack.bootstrap_servers, f"{data['topic_prefix']}.{table}", keys)
    log = stack.settings.log("connect").read_text().splitlines()
    return [history, [line[:200] for line in log if "re-select" in line.lower()][-5:]]


def _stored_versions(own, name: str, keys: set) -> dict:
    """What each store holds for these keys: the Redis version key and the search document's version
    (which write kept a row the database deleted)."""
    from urllib.parse import quote

    import requests

    from connectors.envelope import document_id

    r = redis.Redis.from_url(own.redis_url)
    out = {}
    for region, i in keys:
        doc_id = document_id({"region": region, "id": i}, None)
        got = requests.get(f"{own.search_url}/{name}/_doc/{quote(doc_id, safe='')}", timeout=10).json()
        out[(region, i)] = {"redis_version": r.get(f"cdckit:v:{name}:{region}:{i}"),
                            "search": {k: got.get(k) for k in ("found", "_version", "_index", "error")}}
    return out
