"""The snapshot hand-off race, reproduced on the real stack.

A transaction that starts after the slot's snapshot builder reached FULL_SNAPSHOT but before it
is CONSISTENT, and commits after, is streamed (the exported snapshot does not see it) while its
change sits at a WAL position below the snapshot's `lsn`. Versioning by `lsn` would let the older
snapshot read win; cdckit's version must make the streamed change win in both stores.
"""
import json
import time
import uuid

import psycopg
import pytest
import redis
import requests

from connectors.connect_client import ConnectClient
from connectors.debezium_config import connector_config
from pipelines.config import parse_config
from pipelines.connector_ops import prepare_database
from tests.helpers import drop_connector, pg, read_topic, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def _slot_being_created(stack, slot: str) -> bool:
    with pg(stack) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE query ILIKE %s",
                            (f"%CREATE_REPLICATION_SLOT%{slot}%",)).fetchone()[0] > 0


def _open_tx(stack, sql: str, *args) -> psycopg.Connection:
    conn = psycopg.connect(host=stack.pg_host, port=stack.pg_port, dbname=stack.pg_database, user=stack.pg_user)
    conn.execute(sql, args)
    return conn


def test_transaction_straddling_the_consistent_point_wins(stack, spark, tmp_path):
    name = f"race_{uuid.uuid4().hex[:6]}"
    table, other = f"public.{name}", f"public.{name}_other"
    with pg(stack) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v text)")
        conn.execute(f"CREATE TABLE {other} (id serial PRIMARY KEY)")
        conn.execute(f"INSERT INTO {table} VALUES (1, 'before')")
    data = stack.config(tables=[{"name": table, "redis_key": f"{name}:{{id}}", "index": name}],
                        spark={"checkpoint_dir": str(tmp_path / "ckpt"), "trigger": "1 second"})
    cfg = parse_config(data)
    slot = data["postgres"]["slot"]
    opened: list[psycopg.Connection] = []
    try:
        prepare_database(cfg)
        # 1. A transaction with an xid is running: the slot's snapshot builder must wait for it.
        ta = _open_tx(stack, f"INSERT INTO {other} DEFAULT VALUES")
        opened.append(ta)
        ConnectClient(cfg.connect.url).put_config(cfg.connector_name, connector_config(cfg))
        wait_for(lambda: _slot_being_created(stack, slot), 60, 0.2, "slot creation to start")
        # 2. tb starts while the builder waits; once ta ends (and a checkpoint logs running xacts)
        #    the builder is at FULL_SNAPSHOT and must still wait for tb.
        tb = _open_tx(stack, f"INSERT INTO {other} DEFAULT VALUES")
        opened.append(tb)
        ta.commit()
        with pg(stack) as conn:
            conn.execute("CHECKPOINT")
        time.sleep(1)
        # 3. tc starts after FULL_SNAPSHOT and writes the row: decodable, so it will be streamed.
        tc = _open_tx(stack, f"UPDATE {table} SET v = 'raced' WHERE id = 1")
        opened.append(tc)
        # 4. tb ends: the slot becomes consistent while tc is still open; the snapshot misses tc.
        tb.commit()
        with pg(stack) as conn:
            conn.execute("CHECKPOINT")
        wait_for(lambda: not _slot_being_created(stack, slot), 60, 0.2, "slot to become consistent")
        time.sleep(1)
        tc.commit()

        topic = f"{data['topic_prefix']}.{table}"
        records = read_topic(stack.bootstrap_servers, topic, expect=2)
        (_, snap), (_, raced) = records
        assert snap["op"] == "r" and raced["op"] == "u" and raced["after"]["v"] == "raced"
        # The race really happened: the streamed change sits below the snapshot's position.
        assert int(raced["source"]["lsn"]) < int(snap["source"]["lsn"])

        from pipelines import job

        query = job.start(spark, cfg)
        r = redis.Redis.from_url(stack.redis_url)

        def synced():
            cached = r.get(f"{name}:1")
            requests.post(f"{stack.search_url}/{name}/_refresh")
            doc = requests.get(f"{stack.search_url}/{name}/_doc/1").json().get("_source")
            return cached is not None and doc is not None and (json.loads(cached)["v"], doc["v"])

        wait_for(lambda: query.lastProgress and synced(), 90, 1, "both stores to apply the topic")
        time.sleep(3)  # a further batch must not change it either
        assert synced() == ("raced", "raced")
        query.stop()
    finally:
        for conn in opened:
            conn.close()
        for q in spark.streams.active:
            q.stop()
        drop_connector(stack, data)
