"""The streaming job keeps both stores equal to Postgres through snapshot, mixed writes and a truncate."""
import json
import time
import uuid
from datetime import datetime

import pytest
import redis
import requests

from pipelines.config import parse_config
from tests.support.integration import cache_docs, cli, drop_connector, pg, search_docs, wait_streaming, write_config

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def pg_rows(stack, table):
    with pg(stack) as conn:
        cur = conn.execute(f"SELECT id, name, amount::text, tags, doc::text, big, ts FROM {table}")
        return {str(r[0]): r for r in cur.fetchall()}


def same(pg_row, doc):
    id_, name, amount, tags, docj, big, ts = pg_row
    return (doc.get("id") == id_ and doc.get("name") == name and doc.get("amount") == amount
            and doc.get("tags") == tags and doc.get("doc") == (None if docj is None else json.loads(docj))
            and doc.get("big") == big
            and (ts is None and doc.get("ts") is None
                 or ts is not None and datetime.fromisoformat(doc["ts"].replace("Z", "+00:00")) == ts))


def store_docs(stack, table_cfg):
    return cache_docs(stack, f"{table_cfg.table_name}:"), search_docs(stack, table_cfg.index_name)


# The JVM source starts after a bulk bootstrap (offsets handed over as JSON); the Python source
# applies the snapshot through the stream (the bulk with it: tests/drills/test_bootstrap.py).
@pytest.mark.parametrize("source,bulk", [("python", False), ("jvm", True)])
def test_snapshot_then_mixed_workload_ends_exact(stack, spark, tmp_path, source, bulk):
    name = f"sync_{uuid.uuid4().hex[:6]}"
    table = f"public.{name}"
    with pg(stack) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, name text, amount numeric(12,2), tags int[], "
                     f"doc jsonb, big text, ts timestamptz)")
        conn.execute(f"INSERT INTO {table} SELECT g, 'row ' || g, g * 1.25, ARRAY[g, g+1], "
                     f"jsonb_build_object('g', g), NULL, now() FROM generate_series(1, 3000) g")
        # A TOASTed value (large, incompressible) that later updates of other columns must keep.
        conn.execute(f"UPDATE {table} SET big = (SELECT string_agg(md5(random()::text), '') "
                     f"FROM generate_series(1, 400)) WHERE id = 7")
    data = stack.config(tables=[{"name": table, "redis_key": f"{name}:{{id}}", "index": name}],
                        spark={"checkpoint_dir": str(tmp_path / "ckpt"), "trigger": "1 second", "kafka_source": source})
    path = write_config(tmp_path, data)
    cfg = parse_config(data)
    try:
        assert cli("connector", "apply", "-c", str(path)).returncode == 0
        wait_streaming(stack, data)
        from pipelines.streaming import job
        if bulk:
            from pipelines.bootstrap import steps as bootstrap
            with pg(stack) as conn:  # changes after the reads: each partition's bulk stops at its first
                conn.execute(f"UPDATE {table} SET name = 'before the hand-over' WHERE id % 7 = 0")
                conn.execute(f"DELETE FROM {table} WHERE id BETWEEN 2900 AND 2950")
            watch = bootstrap.Watch(cfg, {table: 3000})
            bootstrap.apply_in_bulk(lambda: spark, cfg, watch)
            assert watch.done is not None and watch.done.detected_by.startswith("bulk apply")
        searchable = []   # the batches that told the visibility publisher they wrote the index
        query = job.start(spark, cfg, written=lambda: searchable.append(1))

        def workload():
            with pg(stack) as conn:
                for i in range(300):
                    conn.execute(f"UPDATE {table} SET name = 'ünïcødé ✓ ' || id, amount = amount + 1 "
                                 f"WHERE id %% 50 = %s", (i % 50,))
                    conn.execute(f"DELETE FROM {table} WHERE id = %s", (3000 - i,))
                    conn.execute(f"INSERT INTO {table} VALUES (%s, NULL, NULL, NULL, NULL, NULL, NULL)",
                                 (10_000 + i,))
                conn.execute(f"UPDATE {table} SET id = 99999 WHERE id = 11")  # primary-key change
                conn.execute(f"UPDATE {table} SET name = 'toast kept' WHERE id = 7")
                # A primary-key change of the TOASTed row: the new key's create has no stored entry to
                # merge the unchanged value from.
                conn.execute(f"UPDATE {table} SET id = 77777 WHERE id = 8")
                conn.execute(f"UPDATE {table} SET big = (SELECT big FROM {table} WHERE id = 7) WHERE id = 77777")
                conn.execute(f"UPDATE {table} SET id = 88888, name = 'moved' WHERE id = 77777")

        workload()  # runs while the query is streaming
        deadline = time.monotonic() + 120
        want = pg_rows(stack, table)
        while time.monotonic() < deadline:
            cache, search = store_docs(stack, cfg.tables[0])
            if set(cache) == set(want) == set(search) and all(
                    same(want[k], cache[k]) and same(want[k], search[k]) for k in want):
                break
            time.sleep(2)
        assert set(cache) == set(want), (len(cache), len(want))
        assert set(search) == set(want), (len(search), len(want))
        bad = [k for k in want if not (same(want[k], cache[k]) and same(want[k], search[k]))]
        assert not bad, (bad[:3], [want[k] for k in bad[:1]], [cache[k] for k in bad[:1]])
        # The batch tells the publisher after its tasks wrote: the stores can be seen equal first.
        deadline = time.monotonic() + 60
        while not searchable and time.monotonic() < deadline:
            time.sleep(0.2)
        assert searchable
        assert len(cache["7"]["big"]) == 12800 and cache["7"]["name"] == "toast kept"
        assert len(cache["88888"]["big"]) == 12800 and len(search["88888"]["big"]) == 12800

        # `cdckit verify` agrees, value by value (numeric, arrays, jsonb, timestamptz, TOAST, unicode) ...
        path = write_config(tmp_path, data)
        ok = cli("verify", "--json", "-c", str(path))
        assert ok.returncode == 0, ok.stdout + ok.stderr
        assert json.loads(ok.stdout)["exact"]
        # ... and finds drift: a key lost from Redis, a field changed and a stray document in search.
        r = redis.Redis.from_url(stack.redis_url)
        r.delete(f"{name}:5")
        requests.post(f"{stack.search_url}/{name}/_doc/6", json={"id": 6, "name": "tampered"})
        requests.post(f"{stack.search_url}/{name}/_doc/777777", json={"id": 777777})
        bad = cli("verify", "--json", "-c", str(path))
        found = json.loads(bad.stdout)["tables"][0]["stores"]
        assert bad.returncode == 1
        assert found["cache"]["missing"] == ["5"]
        assert found["search"]["extra"] == ["777777"]
        assert [d["id"] for d in found["search"]["different"]] == ["6"]
        sampled = cli("verify", "--sample", "50", "--json", "-c", str(path))
        assert json.loads(sampled.stdout)["tables"][0]["rows"] == 50
        # put the stores back for the truncate check below
        requests.delete(f"{stack.search_url}/{name}/_doc/777777")

        # A truncate empties both stores; rows written after it arrive.
        with pg(stack) as conn:
            conn.execute(f"TRUNCATE {table}")
            conn.execute(f"INSERT INTO {table} (id, name) VALUES (1, 'after truncate')")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            cache, search = store_docs(stack, cfg.tables[0])
            if set(cache) == set(search) == {"1"}:
                break
            time.sleep(2)
        assert set(cache) == set(search) == {"1"} and cache["1"]["name"] == "after truncate"
        query.stop()
    finally:
        for q in spark.streams.active:
            q.stop()
        drop_connector(stack, data)
