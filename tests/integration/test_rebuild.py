"""`cdckit rebuild` on the real stack: under continuous writes, while readers poll the alias and the
keys; and over topics built in the shapes a compacted log can take."""
import json
import os
import random
import signal
import threading
import time
import uuid

import pytest
import redis
import requests

from tests.support import records
from tests.support.drills import converged, record
from tests.support.integration import (cli, drop_connector, pg, redis_db, start_job, wait_for, wait_streaming,
                           write_config)

pytestmark = [pytest.mark.integration]
LIVE_DB, SPARE_DB = 5, 6
STALE_AFTER_S = 30.0   # a reader may see a value this much older than the database (the freshness lag: a second
                       # driver beside the live job on two cores; a gap is what the readers are for)


def _cache_dbs(stack, name: str, hot: list[int]) -> dict:
    """Key counts of the live and spare databases and which hot keys each holds (a gap's cause)."""
    out = {}
    for db in (LIVE_DB, SPARE_DB):
        r = redis.Redis.from_url(own_db(stack, db).redis_url)
        out[db] = {"dbsize": r.dbsize(), "hot_missing": [i for i in hot if not r.exists(f"{name}:{i}")]}
    return out


def own_db(stack, db=LIVE_DB):
    return redis_db(stack, db)


class Readers:
    """Polls hot rows in both stores through what users read (the alias, the live database)
    and records every missing row and every value older than STALE_AFTER_S."""

    def __init__(self, stack, name, hot, committed):
        self.stack, self.name, self.hot, self.committed = stack, name, hot, committed
        self.r = redis.Redis.from_url(own_db(stack).redis_url)
        self.stop = threading.Event()
        self.problems: list[str] = []
        self.reads = 0

    def _check(self, store, id_, doc, at):
        if doc is None:
            self.problems.append(f"{store}: row {id_} missing at {at:.1f}")
            return
        newer = self.committed.get((id_, doc["n"] + 1))
        if newer is not None and newer < at - STALE_AFTER_S:
            self.problems.append(f"{store}: row {id_} n={doc['n']} while n+1 was committed {at - newer:.1f} s before")

    def run(self):
        while not self.stop.is_set():
            at = time.time()
            values = self.r.mget([f"{self.name}:{i}" for i in self.hot])
            resp = requests.post(f"{self.stack.search_url}/{self.name}/_mget", json={"ids": [str(i) for i in self.hot]},
                                 timeout=10)
            found = {d["_id"]: d["_source"] for d in resp.json().get("docs", []) if d.get("found")}
            for i, v in zip(self.hot, values):
                self._check("cache", i, None if v is None else json.loads(v), at)
                self._check("search", i, found.get(str(i)), at)
            self.reads += 1
            time.sleep(0.05)


@pytest.mark.drill
def test_rebuild_all_under_write_load_readers_never_see_gaps(stack, tmp_path):
    name = f"rb_{uuid.uuid4().hex[:6]}"
    table = f"public.{name}"
    hot = list(range(1, 41))
    with pg(stack) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, name text, n int)")
        conn.execute(f"INSERT INTO {table} SELECT g, 'r' || g, 0 FROM generate_series(1, 4000) g")
    committed = {(i, 0): 0.0 for i in hot}
    data = stack.config(tables=[{"name": table, "redis_key": f"{name}:{{id}}", "index": name}],
                        redis={"url": own_db(stack).redis_url, "rebuild_db": SPARE_DB},
                        spark={"checkpoint_dir": str(tmp_path / "ckpt"), "trigger": "500 ms"}, metrics_port=0)
    path = write_config(tmp_path, data)
    spare = redis.Redis.from_url(own_db(stack, SPARE_DB).redis_url)
    for db in (LIVE_DB, SPARE_DB):
        redis.Redis.from_url(own_db(stack, db).redis_url).flushdb()
    stop = threading.Event()
    written = {"changes": 0}
    deleted: set[str] = set()

    def writer():
        rnd = random.Random(11)
        next_id = 100_000
        with pg(stack) as conn:
            while not stop.is_set():
                with conn.transaction():
                    rows = conn.execute(f"UPDATE {table} SET n = n + 1 WHERE id = %s RETURNING id, n",
                                        (rnd.choice(hot),)).fetchall()
                    k = rnd.randint(41, 4000)
                    if rnd.random() < 0.5:
                        gone = conn.execute(f"DELETE FROM {table} WHERE id = %s RETURNING id", (k,)).fetchall()
                        deleted.update(str(r[0]) for r in gone)
                    else:
                        conn.execute(f"UPDATE {table} SET name = 'u' || n, n = n + 1 WHERE id = %s", (k,))
                    conn.execute(f"INSERT INTO {table} VALUES (%s, 'new', 0)", (next_id,))
                    next_id += 1
                committed.update({(i, n): time.time() for i, n in rows})
                written["changes"] += 3
                time.sleep(0.01)

    job, readers = None, None
    try:
        assert cli("connector", "apply", "-c", str(path)).returncode == 0
        wait_streaming(stack, data)
        job = start_job(path, tmp_path / "job.log")
        wait_for(lambda: len(own_keys(stack, name)) >= 4000, 180, 1, "the initial snapshot in the cache")
        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        time.sleep(3)
        readers = Readers(stack, name, hot, committed)
        reader_thread = threading.Thread(target=readers.run, daemon=True)
        reader_thread.start()
        before = written["changes"]
        t0 = time.monotonic()
        result = cli("rebuild", "all", "-c", str(path), "--json", timeout=600)
        rebuild_s = time.monotonic() - t0
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        rate = (written["changes"] - before) / rebuild_s
        time.sleep(3)
        stop.set()
        thread.join()
        readers.stop.set()
        reader_thread.join()
        # Writes go on during the rebuild (the rate itself is a benchmark's figure, not a test's).
        assert rate > 10, f"only {rate:.0f} changes/s during the rebuild"
        assert readers.reads > 20
        assert readers.problems == [], (readers.problems[:10], len(readers.problems), _cache_dbs(stack, name, hot),
                                        json.loads(result.stdout).get("summary"))
        outcome = converged(own_db(stack), table, f"{name}:", name, deleted, timeout_s=120)
        record("rebuild all under write load", written["changes"], outcome, reader_problems=len(readers.problems))
        assert not any(outcome.values()), outcome
        # The alias moved to the new generation; the old one is gone, in both stores.
        aliases = requests.get(f"{stack.search_url}/_alias/{name}", timeout=10).json()
        assert list(aliases) == [f"{name}_v2"]
        assert requests.head(f"{stack.search_url}/{name}_v1", timeout=10).status_code == 404
        assert spare.dbsize() == 0
        assert json.loads(result.stdout)["summary"]["old_generation"] == "dropped"
    finally:
        stop.set()
        if readers is not None:
            readers.stop.set()
        if job is not None:
            os.killpg(job.pid, signal.SIGKILL)
        drop_connector(stack, data)


def own_keys(stack, name):
    r = redis.Redis.from_url(own_db(stack).redis_url)
    return [k for k in r.scan_iter(match=f"{name}:*", count=1000)]


def produce(bootstrap, topic, items):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, config={"cleanup.policy": "compact"})])[topic].result(15)
    p = Producer({"bootstrap.servers": bootstrap})
    for k, v in items:
        p.produce(topic, key=k, value=v)
    assert p.flush(15) == 0


def test_rebuild_over_compacted_log_shapes(stack, tmp_path):
    prefix = f"c{uuid.uuid4().hex[:6]}"
    name = f"{prefix}_items"
    topic = f"{prefix}.public.items"
    k, v = records.key, records.value
    produce(stack.bootstrap_servers, topic, [
        (k(1), None),                                    # a key with only its tombstone left
        (k(2), v("c", 2, 100, "two", 90)),               # upsert whose op=d was compacted away ...
        (k(2), None),                                    # ... but whose tombstone remains
        (k(3), v("r", 3, 200, "three", None, snapshot="last")),  # a snapshot read, then
        (k(3), v("u", 3, 150, "three'", None)),           # a change streamed with a lower LSN (fence)
        (k(4), v("c", 4, 300, "four", 290)),
        (k(4), v("d", 4, 310, None, 305)),               # deleted, tombstone compacted away
        (k(5), v("c", 5, 400, "five", 390)),             # a plain survivor
        (k(6), b"{broken"),                              # malformed: dead letter, not a failure
    ])
    data = stack.config(tables=[{"name": "public.items", "redis_key": f"{name}:{{id}}", "index": name}], prefix=prefix,
                        redis={"url": own_db(stack).redis_url, "rebuild_db": SPARE_DB},
                        spark={"checkpoint_dir": str(tmp_path / "ckpt")}, metrics_port=0)
    path = write_config(tmp_path, data)
    live = redis.Redis.from_url(own_db(stack).redis_url)
    for db in (LIVE_DB, SPARE_DB):
        redis.Redis.from_url(own_db(stack, db).redis_url).flushdb()
    live.set(f"{name}:2", b'{"id": 2, "name": "stale"}')   # the old generation holds a stale key

    dry = cli("rebuild", "all", "-c", str(path), "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)["plan"]
    assert plan["end"] == {topic: {"0": 9}} and plan["search"]["public.items"]["target"] == f"{name}_v1"

    # The malformed record is a dead letter of the replay: no switch, the old generation stays and
    # the fresh one is dropped (exit 7, naming `cdckit dlq list`).
    refused = cli("rebuild", "all", "-c", str(path), "--json", timeout=300)
    assert refused.returncode == 7, refused.stdout[-3000:] + refused.stderr[-3000:]
    assert "did not switch: 1 record(s) of its replay were dead-lettered" in refused.stderr
    assert "`cdckit dlq list`" in refused.stderr and "--accept-dead-letters 1" in refused.stderr
    body = json.loads(refused.stdout)
    assert body["dead_letters"] == {"count": 1, "by": {"bulk": 1}, "accepted": 0, "switch": False}
    assert live.get(f"{name}:2") == b'{"id": 2, "name": "stale"}'
    assert redis.Redis.from_url(own_db(stack, SPARE_DB).redis_url).dbsize() == 0
    assert requests.head(f"{stack.search_url}/{name}_v1", timeout=10).status_code == 404

    result = cli("rebuild", "all", "-c", str(path), "--json", "--accept-dead-letters", "1", timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads(result.stdout)["summary"]
    assert summary["bulk"]["dead_letters"] == 1 and summary["bulk"]["survivors"] == 2
    cached = {key.decode().split(":")[1]: json.loads(live.get(key)) for key in live.scan_iter(match=f"{name}:*")}
    assert {i: d["name"] for i, d in cached.items()} == {"3": "three'", "5": "five"}
    requests.post(f"{stack.search_url}/{name}/_refresh", timeout=10)
    hits = requests.post(f"{stack.search_url}/{name}/_search", json={"size": 100}, timeout=10).json()["hits"]["hits"]
    assert {h["_id"]: h["_source"]["name"] for h in hits} == {"3": "three'", "5": "five"}


def test_live_batches_write_the_fresh_generation_first_during_a_rebuild(stack, spark, tmp_path):
    """While the rebuild state asks for it, each live batch also writes the rebuild's targets."""
    from pipelines.state import rebuild_state
    from pipelines.config import parse_config
    from pipelines.streaming.job import batch_writer
    from connectors.kafka.ranges import ARROW_SCHEMA
    from pipelines.spark.schemas import struct_type

    SCHEMA = struct_type(ARROW_SCHEMA)

    name = f"dw_{uuid.uuid4().hex[:6]}"
    data = stack.config(tables=[{"name": "public.items", "redis_key": f"{name}:{{id}}", "index": name}],
                        redis={"url": own_db(stack).redis_url, "rebuild_db": SPARE_DB},
                        spark={"checkpoint_dir": str(tmp_path / "ckpt")}, metrics_port=0)
    cfg = parse_config(data)
    requests.put(f"{stack.search_url}/{name}_v2", json={}, timeout=10)
    for db in (LIVE_DB, SPARE_DB):
        redis.Redis.from_url(own_db(stack, db).redis_url).flushdb()
    targets = rebuild_state.Targets((("public.items", f"{name}_v2"),), SPARE_DB)
    rebuild_state.save(cfg.spark.checkpoint_dir, rebuild_state.RebuildState({}, targets, "catchup", dual_write=True))
    topic = f"{cfg.topic_prefix}.public.items"

    def batch(offset, id_, lsn):
        return (records.key(id_), records.value("c", id_, lsn, f"row{id_}", lsn - 5), topic, 0, offset, None, 0)

    write = batch_writer(cfg)
    write(spark.createDataFrame([batch(0, 1, 100)], SCHEMA), 0)
    rebuild_state.save(cfg.spark.checkpoint_dir, rebuild_state.RebuildState({}, targets, "done"))
    write(spark.createDataFrame([batch(1, 2, 200)], SCHEMA), 1)

    def ids(url, index):
        requests.post(f"{url}/{index}/_refresh", timeout=10)
        hits = requests.post(f"{url}/{index}/_search", json={"size": 10}, timeout=10).json()["hits"]["hits"]
        return sorted(h["_id"] for h in hits)

    live_keys = sorted(k.decode() for k in redis.Redis.from_url(own_db(stack).redis_url).scan_iter(match=f"{name}:*"))
    spare_keys = sorted(k.decode() for k in redis.Redis.from_url(own_db(stack, SPARE_DB).redis_url)
                        .scan_iter(match=f"{name}:*"))
    assert live_keys == [f"{name}:1", f"{name}:2"] and spare_keys == [f"{name}:1"]
    assert ids(stack.search_url, name) == ["1", "2"] and ids(stack.search_url, f"{name}_v2") == ["1"]
    redis.Redis.from_url(own_db(stack, SPARE_DB).redis_url).flushdb()
