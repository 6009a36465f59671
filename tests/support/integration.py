"""Helpers shared by integration tests: CLI runs, Postgres, reading a topic end to end."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import redis
import yaml

from tests.support.stack import ROOT, Endpoints


def write_config(tmp_path: Path, data: dict[str, Any], name: str = "cdckit.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120, cwd: Path = ROOT
        ) -> subprocess.CompletedProcess:
    """Run the real `cdckit` entry point in a child process, as a user would."""
    import os

    return subprocess.run([sys.executable, "-m", "pipelines.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def cli_json(*args: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess, Any]:
    """`cli` with `--json`: the result and its parsed output; a run that printed none fails with its stderr."""
    result = cli(*args, "--json", timeout=timeout)
    try:
        return result, json.loads(result.stdout)
    except ValueError:
        raise AssertionError(f"{' '.join(args)} --json printed no JSON (exit {result.returncode}): "
                             f"{result.stdout[-500:]} {result.stderr[-3000:]}") from None


def pg(stack: Endpoints) -> psycopg.Connection:
    return psycopg.connect(host=stack.pg_host, port=stack.pg_port, dbname=stack.pg_database,
                           user=stack.pg_user, autocommit=True)


def create_simple_table(stack: Endpoints, table: str, rows: int) -> None:
    """(id int primary key, name text, n int) with `rows` rows."""
    with pg(stack) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, name text, n int)")
        if rows:
            conn.execute(f"INSERT INTO {table} SELECT g, 'row ' || g, g FROM generate_series(1, {rows}) g")


def read_topic(bootstrap: str, topic: str, expect: int, timeout_s: float = 60) -> list[tuple[Any, Any]]:
    """(key, value) pairs of every partition from its first offset, decoded (None for tombstones),
    in offset order per partition, partition after partition (a key's records keep their order)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cdckit-tests", "enable.auto.commit": False})
    deadline = time.monotonic() + timeout_s
    partitions: dict = {}
    while not partitions and time.monotonic() < deadline:  # Debezium creates it with its first record
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        partitions = meta.partitions if meta.error is None else {}
        if not partitions:
            time.sleep(0.2)
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    records: list[tuple[int, int, Any, Any]] = []
    try:
        while len(records) < expect and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            decode = lambda b: None if b is None else json.loads(b)  # noqa: E731
            records.append((msg.partition(), msg.offset(), decode(msg.key()), decode(msg.value())))
    finally:
        consumer.close()
    return [(k, v) for _, _, k, v in sorted(records, key=lambda r: r[:2])]


def read_topic_to_end(bootstrap: str, topic: str, timeout_s: float = 60) -> list[tuple[Any, Any]]:
    """As read_topic, but every partition up to its end as of the call, read the way the pipeline
    reads ranges (connectors/kafka/ranges.read_messages: done by position): complete, and done as
    soon as the records are read (read_topic with an open `expect` waits out its timeout)."""
    from connectors.kafka.offsets import begin_offsets, end_offsets
    from connectors.kafka.ranges import KafkaRange, close_readers, read_messages

    conf = {"bootstrap.servers": bootstrap}
    begin, end = begin_offsets(conf, [topic]).get(topic, {}), end_offsets(conf, [topic]).get(topic, {})
    decode = lambda b: None if b is None else json.loads(b)  # noqa: E731
    out: list[tuple[Any, Any]] = []
    try:
        for partition in sorted(end, key=int):
            start, stop = int(begin.get(partition, 0)), int(end[partition])
            if stop > start:
                for msgs in read_messages(conf, KafkaRange(topic, int(partition), start, stop), timeout_s):
                    out.extend((decode(m.key()), decode(m.value())) for m in msgs)
    finally:
        close_readers()   # the kept reader, which the test process would otherwise leave open
    return out


def by_key(records: list[tuple[Any, Any]]) -> dict[str, list[Any]]:
    """Each key's ops in log order (None for a tombstone), the key JSON-encoded."""
    out: dict[str, list[Any]] = {}
    for k, v in records:
        out.setdefault(json.dumps(k, sort_keys=True), []).append(None if v is None else v["op"])
    return out


def drop_connector(stack: Endpoints, data: dict[str, Any]) -> None:
    """Remove what a test's connector left behind: the connector, its slot and publication."""
    from connectors import postgres
    from connectors.connect_client import ConnectClient, ConnectNotFound

    name = data["connect"].get("connector_name") or f"{data['topic_prefix']}-postgres"
    try:
        ConnectClient(stack.connect_url).delete(name)
    except ConnectNotFound:
        pass
    with pg(stack) as conn:
        for _ in range(50):  # the slot stays active until the task has stopped
            try:
                postgres.drop_slot(conn, data["postgres"]["slot"])
                break
            except psycopg.errors.ObjectInUse:
                time.sleep(0.2)
        postgres.drop_publication(conn, data["postgres"]["publication"])


def drop_pipeline(stack: Endpoints, data: dict[str, Any], *tables: str) -> None:
    """`drop_connector`, then the test's tables and the config's support tables."""
    drop_connector(stack, data)
    pg_ = data["postgres"]
    with pg(stack) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {', '.join(tables) + ', ' if tables else ''}{pg_['heartbeat_table']}, "
                     f"{pg_['signal_table']}, {pg_['truncate_table']}")


def wait_streaming(stack: Endpoints, data: dict[str, Any], timeout_s: float = 60) -> None:
    """Debezium holds the slot's walsender only once the snapshot is done and streaming began."""
    from connectors import postgres

    deadline = time.monotonic() + timeout_s
    with pg(stack) as conn:
        while time.monotonic() < deadline:
            info = postgres.slot_info(conn, data["postgres"]["slot"])
            if info is not None and info.active:
                return
            time.sleep(0.2)
    raise TimeoutError(f"slot {data['postgres']['slot']} did not become active in {timeout_s} s")


def wait_for(check, timeout_s: float = 90, interval_s: float = 1.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(interval_s)
    raise TimeoutError(f"{what} not reached within {timeout_s} s")


def cache_docs(stack: Endpoints, key_prefix: str) -> dict[str, Any]:
    """Redis JSON documents under `key_prefix`, by the id after the prefix."""
    import redis

    r = redis.Redis.from_url(stack.redis_url)
    keys = [k.decode() for k in r.scan_iter(match=f"{key_prefix}*", count=1000)]
    values = r.mget(keys) if keys else []
    return {k[len(key_prefix):]: json.loads(v) for k, v in zip(keys, values) if v is not None}


def search_docs(stack: Endpoints, index: str, sort_field: str = "id") -> dict[str, Any]:
    """Every document, paged with search_after on `sort_field`."""
    import requests

    requests.post(f"{stack.search_url}/{index}/_refresh", timeout=10)
    docs: dict[str, Any] = {}
    after = None
    while True:
        # unmapped_type: an index with no document yet has no mapping for the field to sort on.
        body: dict[str, Any] = {"size": 10000, "query": {"match_all": {}},
                                "sort": [{sort_field: {"order": "asc", "unmapped_type": "long"}}]}
        if after is not None:
            body["search_after"] = after
        resp = requests.post(f"{stack.search_url}/{index}/_search", timeout=60, json=body)
        if resp.status_code == 404:
            return docs
        assert resp.ok, resp.text[:500]
        hits = resp.json()["hits"]["hits"]
        docs.update((h["_id"], h["_source"]) for h in hits)
        if len(hits) < 10000:
            return docs
        after = hits[-1]["sort"]


def simple_rows(stack: Endpoints, table: str) -> dict[str, dict[str, Any]]:
    """Rows of a table whose columns JSON-encode the same way in Debezium and row_to_json."""
    with pg(stack) as conn:
        return {str(r["id"]): r for (r,) in conn.execute(f"SELECT row_to_json(t) FROM {table} t")}


def diff_stores(stack: Endpoints, table: str, key_prefix: str, index: str) -> dict[str, list[str]]:
    want = simple_rows(stack, table)
    out = {}
    for store, got in (("cache", cache_docs(stack, key_prefix)), ("search", search_docs(stack, index))):
        out[f"{store}_missing"] = sorted(set(want) - set(got))
        out[f"{store}_extra"] = sorted(set(got) - set(want))
        out[f"{store}_stale"] = sorted(k for k in set(want) & set(got) if got[k] != want[k])
    return out


def stores_exact(stack: Endpoints, table: str, key_prefix: str, index: str) -> bool:
    return not any(diff_stores(stack, table, key_prefix, index).values())


def assert_exact(stack: Endpoints, table: str, key_prefix: str, index: str, timeout_s: float = 120) -> None:
    """Wait for both stores to equal the table; on failure show what differs (first keys of each kind)."""
    deadline = time.monotonic() + timeout_s
    while True:
        diff = diff_stores(stack, table, key_prefix, index)
        if not any(diff.values()):
            return
        if time.monotonic() > deadline:
            shown = {k: (len(v), v[:5]) for k, v in diff.items() if v}
            raise AssertionError(f"{table} differs from its stores: {shown}")
        time.sleep(1)


def start_job(path: Path, log: Path, command: str = "run", cwd: Path = ROOT) -> subprocess.Popen:
    """`cdckit run` as its own process group (so a drill can kill -9 the driver and its JVM)."""
    import os

    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    return subprocess.Popen([sys.executable, "-m", "pipelines.cli", command, "-c", str(path)], cwd=cwd, env=env,
                            stdout=open(log, "ab"), stderr=subprocess.STDOUT, start_new_session=True)


def stop_job(proc: subprocess.Popen | None) -> None:
    """SIGTERM to a `start_job` process group still running (it stops after its batch), then SIGKILL after 60 s."""
    import os
    import signal

    if proc is None or proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


def batch_in_flight(query_dir: Path) -> bool:
    """Spark wrote a batch's offsets in this query checkpoint but has not committed it yet (after two commits)."""
    offsets = {p.name for p in (query_dir / "offsets").glob("[0-9]*")}
    commits = {p.name for p in (query_dir / "commits").glob("[0-9]*")}
    return bool(offsets - commits) and len(commits) >= 2


def batches_committed(checkpoint_dir: Path) -> int:
    """The number of the job's newest committed batch plus one (Spark's commit log in the checkpoint,
    whose old entries Spark deletes: the newest's name counts, not the files)."""
    return max((int(p.name) + 1 for p in (Path(checkpoint_dir) / "query" / "commits").glob("[0-9]*")
                if p.name.isdigit()), default=0)


def wait_batches(checkpoint_dir: Path, target: int, proc: subprocess.Popen, log: Path, timeout_s: float,
                 what: str) -> None:
    """Until the job's query committed batch number `target` - 1 (see batches_committed); the job
    must still run (its log's tail shows why it did not)."""
    wait_for(lambda: batches_committed(checkpoint_dir) >= target or proc.poll() is not None, timeout_s, 0.2, what)
    assert proc.poll() is None, log.read_text()[-3000:]


def process_running(pid: int) -> bool:
    """Whether the process exists and is not a zombie (ended, not yet waited for by its parent)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_group_gone(pgid: int, timeout_s: float = 60) -> None:
    """Until no process of the group is left (a JVM lingers a moment after kill -9 of its group)."""
    import os

    def gone() -> bool:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        return False

    wait_for(gone, timeout_s, 0.1, f"process group {pgid} gone")


def kill_mid_batch(proc: subprocess.Popen, query_dir: Path, log: Path, timeout_s: float = 180) -> None:
    """kill -9 of a `start_job` driver (Python and its JVM) while a batch of that query is in flight."""
    import os
    import signal

    wait_for(lambda: batch_in_flight(query_dir) or proc.poll() is not None, timeout_s, 0.05, "a batch in flight")
    assert proc.poll() is None, log.read_text()[-3000:]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    wait_group_gone(proc.pid)


def key_history(bootstrap: str, topic: str, keys: set) -> dict:
    """Each key's records in the topic, in log order: (partition, offset, op, source.sequence, source.lsn),
    for showing why a store differs. `keys` are record keys as tuples of their values."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "cdckit-tests-history", "enable.auto.commit": False})
    parts = c.list_topics(topic, timeout=10).topics[topic].partitions
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    out: dict = {k: [] for k in keys}
    idle = 0
    deadline = time.monotonic() + 60  # a topic still written to (a failed drill's workload) never idles
    while idle < 5 and time.monotonic() < deadline:
        msgs = c.consume(1000, 1)
        idle = idle + 1 if not msgs else 0
        for m in msgs:
            if m.error() is not None or m.key() is None:
                continue
            key = tuple(json.loads(m.key()).values())
            if key in out:
                v = json.loads(m.value()) if m.value() else None
                out[key].append((m.partition(), m.offset(), v and v["op"], v and v["source"].get("sequence"),
                                 v and v["source"].get("lsn")))
    c.close()
    return out


def redis_db(stack: Endpoints, db: int) -> Endpoints:
    """The stack's endpoints with the Redis URL pointing at database `db`."""
    return dataclasses.replace(stack, redis_url=urlsplit(stack.redis_url)._replace(path=f"/{db}").geturl())


def fresh_redis_dbs(stack: Endpoints, live_db: int, spare_db: int) -> Endpoints:
    """A test's own live and rebuild databases, emptied; the endpoints pointing at the live one."""
    for db in (live_db, spare_db):
        redis.Redis.from_url(redis_db(stack, db).redis_url).flushdb()
    return redis_db(stack, live_db)
