"""The argument read-your-writes rests on (connectors/visibility_watermark.py), held against the real worker
(issue #38.1): Debezium confirms to the slot only what Kafka Connect committed, and Connect commits
only up to the first record the producer has not acknowledged. A second broker joins the stack's
cluster and leads one table's topic; it is stopped (SIGSTOP) with a change of that table in flight,
while later transactions of another table, on the first broker, are acknowledged and read back. The
slot's confirmed position (the watermark's whole basis) must stay below the held transaction's
commit until the broker comes back, and pass it after."""
from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from connectors import postgres
from connectors.visibility_watermark import format_lsn
from pipelines.client import commit_token
from tests.support.integration import cli, drop_pipeline, pg, wait_for, wait_streaming, write_config
from tests.support.ports import free_port

pytestmark = pytest.mark.integration
HOLD_S = 8   # eight offset flushes of the stack's worker (offset.flush.interval.ms = 1000)


def _kafka(stack):
    from pipelines.devstack import stack as devstack

    if stack.settings is None:
        pytest.skip("a second broker joins the local stack's cluster")
    return next(s for s in devstack.servers(stack.settings) if s.name == "kafka")


def _records(bootstrap: str, topic: str) -> int:
    """Records in the topic over its partitions (0 before it exists)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ends{uuid.uuid4().hex[:6]}"})
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts)
    except (KafkaException, KeyError):
        return 0
    finally:
        c.close()


def _second_broker(kafka, home: Path) -> tuple[subprocess.Popen, int]:
    """A broker-only node (id 2) of the stack's KRaft cluster, on its own port and log directory."""
    cluster_id = next(line.split("=", 1)[1].strip() for line in (kafka.data / "meta.properties").read_text().splitlines()
                      if line.startswith("cluster.id="))
    port = free_port()
    home.mkdir(parents=True, exist_ok=True)
    props = home / "broker.properties"
    props.write_text("\n".join([
        "process.roles=broker", "node.id=2", f"controller.quorum.bootstrap.servers=127.0.0.1:{kafka.controller_port}",
        f"listeners=PLAINTEXT://127.0.0.1:{port}", f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names=CONTROLLER", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name=PLAINTEXT", f"log.dirs={home / 'data'}", "auto.create.topics.enable=false",
        "offsets.topic.replication.factor=1", "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1"]) + "\n")
    subprocess.run(kafka._java("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props),
                               "--no-initial-controllers", heap="-Xmx256m"), check=True, capture_output=True)
    log = open(home / "broker.log", "ab")
    proc = subprocess.Popen(kafka._java("kafka.Kafka", str(props), heap="-Xmx384m"), stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    return proc, port


def test_the_slot_never_passes_a_record_whose_acknowledgement_is_held(stack, tmp_path):
    kafka = _kafka(stack)
    p = f"ack{uuid.uuid4().hex[:6]}"
    held_t, free_t = f"public.{p}_held", f"public.{p}_free"
    with pg(stack) as conn:
        for t in (held_t, free_t):
            conn.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, body text)")
    data = stack.config(tables=[{"name": t, "index": t.split(".")[1], "redis_key": f"{t}:{{id}}"}
                                for t in (held_t, free_t)], prefix=p)
    path = write_config(tmp_path, data)
    held_topic, free_topic = f"{p}.{held_t}", f"{p}.{free_t}"
    admin = AdminClient({"bootstrap.servers": stack.bootstrap_servers})
    broker = None

    def confirmed() -> int:
        with pg(stack) as conn:
            return int(postgres.slot_info(conn, data["postgres"]["slot"]).confirmed_flush_lsn)

    def write(table: str, row: int) -> int:
        with pg(stack) as conn:
            conn.execute(f"INSERT INTO {table} VALUES (%s, 'x')", (row,))
            conn.commit()
            return commit_token(conn)

    try:
        assert cli("connector", "apply", "-c", str(path)).returncode == 0
        wait_streaming(stack, data)
        # Every topic the connector writes exists on the first broker before the second joins (the
        # controller would place new ones on either), but the held table's, made on the second.
        write(free_t, 0)
        wait_for(lambda: _records(stack.bootstrap_servers, free_topic) == 1
                 and _records(stack.bootstrap_servers, f"__debezium-heartbeat.{p}") > 0, 60, 0.5,
                 "the free table's topic and the heartbeats")
        broker, _ = _second_broker(kafka, tmp_path / "broker2")
        wait_for(lambda: any(b.id == 2 for b in admin.list_topics(timeout=5).brokers.values())
                 or broker.poll() is not None, 120, 1, "the second broker registered")
        assert broker.poll() is None, (tmp_path / "broker2" / "broker.log").read_text()[-3000:]
        admin.create_topics([NewTopic(held_topic, num_partitions=1, replica_assignment=[[2]],
                                      config={"cleanup.policy": "compact"})])[held_topic].result(30)
        first = write(held_t, 0)
        wait_for(lambda: _records(stack.bootstrap_servers, held_topic) == 1, 60, 0.5, "the held table's first record")
        wait_for(lambda: confirmed() >= first, 60, 0.5, "the slot to confirm it")

        os.kill(broker.pid, signal.SIGSTOP)   # its partitions' acknowledgements stop
        try:
            held = write(held_t, 1)
            frees = [write(free_t, i) for i in range(1, 21)]
            wait_for(lambda: _records(stack.bootstrap_servers, free_topic) == 21, 60, 0.5,
                     "the later transactions acknowledged by the first broker")
            seen = []
            deadline = time.monotonic() + HOLD_S
            while time.monotonic() < deadline:
                seen.append(confirmed())
                time.sleep(0.5)
            assert max(seen) < held, (format_lsn(max(seen)), format_lsn(held))
        finally:
            os.kill(broker.pid, signal.SIGCONT)
        wait_for(lambda: _records(stack.bootstrap_servers, held_topic) == 2, 120, 0.5, "the held record delivered")
        wait_for(lambda: confirmed() >= max(frees), 60, 0.5, "the slot to pass every transaction")
    finally:
        try:
            drop_pipeline(stack, data, held_t, free_t)
        finally:
            if broker is not None:
                if broker.poll() is None:
                    os.kill(broker.pid, signal.SIGCONT)
                for fut in admin.delete_topics([held_topic]).values():
                    try:
                        fut.result(30)
                    except Exception:  # noqa: BLE001 - never created
                        pass
                os.killpg(broker.pid, signal.SIGTERM)
                try:
                    broker.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(broker.pid, signal.SIGKILL)
                    broker.wait()
