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
from pipelines.ops.connector_admin import wanted_config
from pipelines.config import parse_config
from pipelines.ops.connector_admin import prepare_database
from tests.support.integration import drop_connector, pg, read_topic, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def _slot_being_created(stack, slot: str) -> bool:
    with pg(stack) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE query ILIKE %s",
                            (f"%CREATE_REPLICATION_SLOT%{slot}%",)).fetchone()[0] > 0


def _wal_reserved(stack, slot: str) -> bool:
    # The builder's first xl_running_xacts is logged right after the slot's restart_lsn is set.
    with pg(stack) as conn:
        row = conn.execute("SELECT restart_lsn FROM pg_replication_slots WHERE slot_name = %s", (slot,)).fetchone()
        return row is not None and row[0] is not None


def _xids_older_than(stack, xid: int) -> list[tuple]:
    """Backends still holding an xid assigned before `xid` (test clusters never wrap around)."""
    with pg(stack) as conn:
        return conn.execute("SELECT pid, backend_xid::text, application_name, left(query, 80) FROM pg_stat_activity"
                            " WHERE backend_xid IS NOT NULL AND backend_xid::text::bigint < %s", (xid,)).fetchall()


def _consistent_after_checkpoint(stack, slot: str) -> bool:
    # Each CHECKPOINT logs xl_running_xacts, so the builder sees a transaction's end without waiting
    # for the bgwriter's 15 s snapshot.
    with pg(stack) as conn:
        conn.execute("CHECKPOINT")
    return not _slot_being_created(stack, slot)


def _open_tx(stack, sql: str, *args) -> tuple[psycopg.Connection, int]:
    """A transaction left open after `sql`, and its 32-bit xid."""
    conn = psycopg.connect(host=stack.pg_host, port=stack.pg_port, dbname=stack.pg_database, user=stack.pg_user)
    conn.execute(sql, args)
    xid = conn.execute("SELECT pg_current_xact_id()::text::bigint % 4294967296").fetchone()[0]
    return conn, xid


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
        # The builder moves START -> BUILDING -> FULL -> CONSISTENT, each step on an xl_running_xacts
        # record showing every transaction of the previous record ended. The steps below wait for the
        # conditions of each step rather than for fixed times, so a slow machine or a stray transaction
        # (another test's heartbeat, autovacuum) cannot put tc among the transactions the builder
        # waits for: tc waits for the slot, so the slot would then never become consistent.
        # 1. A transaction with an xid is running: the slot's snapshot builder must wait for it.
        ta, _ = _open_tx(stack, f"INSERT INTO {other} DEFAULT VALUES")
        opened.append(ta)
        ConnectClient(cfg.connect.url).put_config(cfg.connector_name, wanted_config(cfg))
        wait_for(lambda: _wal_reserved(stack, slot), 60, 0.1, "slot to reserve WAL")
        time.sleep(0.5)  # the first running-xacts record follows restart_lsn in the same call
        # 2. tb starts after that record, so only what was running before it holds the builder in
        #    BUILDING. Once ta and any such stray transaction ended, a CHECKPOINT's record (or the
        #    builder's own) moves it to FULL, and it must then still wait for tb.
        tb, tb_xid = _open_tx(stack, f"INSERT INTO {other} DEFAULT VALUES")
        opened.append(tb)
        ta.commit()
        wait_for(lambda: not _xids_older_than(stack, tb_xid), 60, 0.1, "transactions older than tb to end")
        with pg(stack) as conn:
            conn.execute("CHECKPOINT")
        # 3. tc starts after FULL_SNAPSHOT and writes the row: decodable, so it will be streamed.
        tc, _ = _open_tx(stack, f"UPDATE {table} SET v = 'raced' WHERE id = 1")
        opened.append(tc)
        # 4. tb ends: the slot becomes consistent while tc is still open; the snapshot misses tc.
        tb.commit()
        try:
            wait_for(lambda: _consistent_after_checkpoint(stack, slot), 60, 0.5, "slot to become consistent")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; backends holding xids: {_xids_older_than(stack, 2**62)}") from exc
        time.sleep(1)
        tc.commit()

        topic = f"{data['topic_prefix']}.{table}"
        records = read_topic(stack.bootstrap_servers, topic, expect=2)
        (_, snap), (_, raced) = records
        assert snap["op"] == "r" and raced["op"] == "u" and raced["after"]["v"] == "raced"
        # The race really happened: the streamed change sits below the snapshot's position.
        assert int(raced["source"]["lsn"]) < int(snap["source"]["lsn"])

        from pipelines.streaming import job
        query = job.start(spark, cfg)
        r = redis.Redis.from_url(stack.redis_url)

        def synced():
            cached = r.get(f"{name}:1")
            requests.post(f"{stack.search_url}/{name}/_refresh")
            doc = requests.get(f"{stack.search_url}/{name}/_doc/1").json().get("_source")
            return cached is not None and doc is not None and (json.loads(cached)["v"], doc["v"])

        wait_for(lambda: query.lastProgress and synced(), 90, 1, "both stores to apply the topic")
        # A further batch (a row of its own) must not change it either.
        with pg(stack) as conn:
            conn.execute(f"INSERT INTO {table} VALUES (2, 'later')")
        wait_for(lambda: r.get(f"{name}:2") is not None, 90, 0.5, "a further batch")
        assert synced() == ("raced", "raced")
        query.stop()
    finally:
        for conn in opened:
            conn.close()
        for q in spark.streams.active:
            q.stop()
        drop_connector(stack, data)
