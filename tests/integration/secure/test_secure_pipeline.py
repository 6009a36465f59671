"""The whole pipeline with every hop encrypted and authenticated, against real servers: PostgreSQL
with ssl=on and `verify-full` (TLS-only, scram, replication over TLS), Apache Kafka on SASL_SSL
(SCRAM-SHA-512) for cdckit, Spark's reader and a Kafka Connect worker running Debezium, Redis on a
TLS port with an ACL user, the search API over HTTPS with basic auth. cdckit connects as the
least-privilege roles of connectors/sql/roles.sql. The snapshot, live changes, a rebuild and
verify all pass; Connect holds a reference, never the database password; and the broker's ACLs
keep the dead-letter topic (row images) from a user who may read the change topics.

Its own TLS servers, certificates made at start (tests/support/secure_*.py), and the package's secure
broker and Connect worker (tests/integration/secure/conftest.py): not the shared `stack`."""
from __future__ import annotations

import json
import os
import signal
import uuid

import pytest
import requests

from tests.integration.secure.conftest import ANALYST, ANALYST_PW
from tests.support.integration import cli, start_job, wait_for, write_config
from tests.support.secure_servers import make_certificates, tls_postgres, tls_redis, tls_search

pytestmark = pytest.mark.integration
TABLE = "public.accounts"


@pytest.fixture(scope="module")
def world(tmp_path_factory, secure_broker, secure_connect):
    """TLS Postgres, Redis and search of this module's own, with the package's secure broker and
    Connect worker (tests/integration/secure/conftest.py)."""
    home = tmp_path_factory.mktemp("secure")
    certs = make_certificates(home)
    os.environ["CDCKIT_TEST_KAFKA_PW"] = secure_broker.password
    with tls_postgres(certs, logical=True) as pg, tls_redis(certs) as redis, tls_search(certs) as search:
        yield dict(home=home, certs=certs, broker=secure_broker, connect=secure_connect, pg=pg, redis=redis,
                   search=search)


@pytest.fixture(scope="module")
def pipeline(world):
    """A table, the least-privilege roles, and the config of the whole secure stack."""
    from pipelines.config import parse_config
    from pipelines.ops.privileges import roles_script

    home, pg = world["home"], world["pg"]
    prefix = f"s{uuid.uuid4().hex[:6]}"
    secrets = home / "secrets"
    secrets.mkdir()
    for name, value in (("cdc", "Cdc-Secure-9f3a"), ("reader", "Reader-Secure-1d7e"),
                        ("redis", world["redis"].password), ("search", world["search"].password)):
        (secrets / name).write_text(value)
    data = {
        "topic_prefix": prefix,
        "postgres": {"host": "127.0.0.1", "port": pg.port, "database": pg.database, "user": "sec_cdc",
                     "password": {"file": str(secrets / "cdc")}, "reader_user": "sec_reader",
                     "reader_password": {"file": str(secrets / "reader")}, "sslmode": "verify-full",
                     "sslrootcert": str(world["certs"].ca), "slot": prefix, "publication": prefix},
        "kafka": {**world["broker"].kafka_config(), "partitions": 3},
        "connect": {"url": world["connect"].s.connect_url, "heartbeat_interval_ms": 2000, "timeout_s": 30},
        "tables": [{"name": TABLE, "redis_key": "account:{id}", "index": "accounts"}],
        "search": {"kind": "opensearch", "url": world["search"].url, "index_settings": {"number_of_replicas": 0}, "username": world["search"].user,
                   "password": {"file": str(secrets / "search")}, "ca_certs": str(world["certs"].ca)},
        "redis": {"url": f"rediss://127.0.0.1:{world['redis'].port}/0", "username": world["redis"].user,
                  "password": {"file": str(secrets / "redis")}, "ca_certs": str(world["certs"].ca),
                  "rebuild_db": 1},
        "spark": {"checkpoint_dir": str(home / "ckpt"), "trigger": "500 ms"},
        "metrics_port": 0,
    }
    with pg.superuser() as conn:
        conn.execute(f"CREATE TABLE {TABLE} (id int PRIMARY KEY, owner text, balance numeric(20,2), "
                     "opened date, notes text)")
        conn.execute(f"INSERT INTO {TABLE} SELECT g, 'owner ' || g, g * 1000.25, DATE '2020-01-01' + g, "
                     "repeat('n', 3000 + g) FROM generate_series(1, 300) g")
        conn.execute(roles_script(parse_config(data), "sec_cdc", "sec_reader"))
        conn.execute("ALTER ROLE sec_cdc PASSWORD 'Cdc-Secure-9f3a'")
        conn.execute("ALTER ROLE sec_reader PASSWORD 'Reader-Secure-1d7e'")
    yield data, write_config(home, data)
    # The worker is the package's: it is left without this module's connector.
    requests.delete(f"{data['connect']['url']}/connectors/{prefix}-postgres", timeout=30)


def _verified(path) -> bool:
    result = cli("verify", "-c", str(path), timeout=300)
    return result.returncode == 0


def _topic_values(broker, topic: str) -> list[str]:
    """Every record value of a topic, read over SASL_SSL as the main user."""
    from confluent_kafka import Consumer, TopicPartition

    from pipelines.config import parse_config
    from tests.support.configs import BASE

    kafka = parse_config({**BASE, "kafka": broker.kafka_config()}).kafka
    consumer = Consumer({**kafka.client_config(), "group.id": f"peek-{uuid.uuid4().hex[:6]}"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        out, idle = [], 0
        while idle < 5:
            msg = consumer.poll(1)
            if msg is None or msg.error():
                idle += 1
                continue
            out.append((msg.value() or b"").decode())
        return out
    finally:
        consumer.close()


def test_sync_rebuild_and_verify_over_tls_and_sasl(world, pipeline):
    data, path = pipeline
    pg = world["pg"]
    check = cli("config", "check", "--connect", "-c", str(path))
    assert check.returncode == 0, check.stdout + check.stderr
    job = start_job(path, world["home"] / "job.log", command="bootstrap")
    try:
        # Snapshot, then live changes of every kind: insert, update (TOASTed column untouched),
        # primary-key change, delete, truncate-free.
        wait_for(lambda: _verified(path), 400, 5, "the snapshot verified exact")
        with pg.superuser() as conn:
            conn.execute(f"INSERT INTO {TABLE} SELECT g, 'new ' || g, 9007199254740993.01, DATE '2024-02-29', "
                         "'x' FROM generate_series(301, 340) g")
            conn.execute(f"UPDATE {TABLE} SET balance = balance + 1 WHERE id % 7 = 0")
            conn.execute(f"UPDATE {TABLE} SET id = id + 1000 WHERE id BETWEEN 10 AND 14")
            conn.execute(f"DELETE FROM {TABLE} WHERE id % 11 = 0")
        wait_for(lambda: _verified(path), 300, 3, "the live changes verified exact")
    finally:
        job.send_signal(signal.SIGTERM)
        job.wait(180)
    log = (world["home"] / "job.log").read_text()
    assert job.returncode == 0, log[-3000:]

    rebuild = cli("rebuild", "all", "-c", str(path), timeout=600)
    assert rebuild.returncode == 0, rebuild.stdout[-2000:] + rebuild.stderr[-3000:]
    verify = cli("verify", "-c", str(path), timeout=300)
    assert verify.returncode == 0, verify.stdout[-2000:] + verify.stderr[-2000:]

    # Connect stores and returns the reference to the password file, never the password.
    name = f"{data['topic_prefix']}-postgres"
    stored = requests.get(f"{data['connect']['url']}/connectors/{name}/config", timeout=10).json()
    assert stored["database.password"].startswith("${dir:") and "Cdc-Secure-9f3a" not in json.dumps(stored)
    configs = _topic_values(world["broker"], "cdckit-connect-configs")
    assert any("${dir:" in v for v in configs) and not any("Cdc-Secure-9f3a" in v for v in configs)
    every_output = log + check.stdout + check.stderr + rebuild.stdout + rebuild.stderr + verify.stdout
    for secret in ("Cdc-Secure-9f3a", "Reader-Secure-1d7e", world["broker"].password, world["redis"].password,
                   world["search"].password):
        assert secret not in every_output


def test_acls_keep_dead_letters_from_a_reader_of_the_change_topics(world, pipeline):
    """A user the broker's ACLs let read `<prefix>.public.*` (and its own groups) is refused the
    dead-letter topic, which holds row images: as README's dead-letter section advises."""
    from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, ResourcePatternType,
                                       ResourceType)

    from pipelines.config import load_config

    data, path = pipeline
    cfg = load_config(path)
    prefix, dlq = data["topic_prefix"], cfg.dead_letter_topic
    change_topic = f"{prefix}.{TABLE}"
    # A record that cannot be decoded becomes a dead letter (the job writes the DLQ as cdckit).
    producer = Producer(cfg.kafka.client_config())
    producer.produce(change_topic, key=b'{"id": 999999}', value=b"not json")
    assert producer.flush(30) == 0
    owner = Consumer({**cfg.kafka.client_config(), "group.id": f"owner-{uuid.uuid4().hex[:6]}"})

    def letters() -> int:
        try:
            return owner.get_watermark_offsets(TopicPartition(dlq, 0), timeout=5)[1]
        except Exception:  # noqa: BLE001 - the topic is made with the first letter
            return 0

    job = start_job(path, world["home"] / "job2.log", command="run")
    try:
        wait_for(lambda: letters() >= 1, 240, 3, "a dead letter")
    finally:
        job.send_signal(signal.SIGTERM)
        job.wait(180)

    admin = AdminClient(cfg.kafka.client_config())
    for resource, name in ((ResourceType.TOPIC, f"{prefix}.public."), (ResourceType.GROUP, f"{ANALYST}-")):
        binding = AclBinding(resource, name, ResourcePatternType.PREFIXED, f"User:{ANALYST}", "*",
                             AclOperation.READ, AclPermissionType.ALLOW)
        for future in admin.create_acls([binding]).values():
            future.result(30)
    analyst = {**cfg.kafka.client_config(), "sasl.username": ANALYST, "sasl.password": ANALYST_PW}

    def first_message(topic: str):
        consumer = Consumer({**analyst, "group.id": f"{ANALYST}-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition(topic, p, 0) for p in range(3 if topic == change_topic else 1)])
            for _ in range(30):
                msg = consumer.poll(1)
                if msg is not None:
                    return msg
        finally:
            consumer.close()

    read = wait_for(lambda: first_message(change_topic), 60, 1, "the analyst's read of a change topic")
    assert read.error() is None and read.value()
    assert first_message(dlq) is None  # nothing fetched: the broker refuses the topic
    as_analyst = AdminClient(analyst)
    asked = as_analyst.list_topics(topic=dlq, timeout=10).topics[dlq]
    assert asked.error is not None and asked.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    meta = as_analyst.list_topics(timeout=10)
    assert change_topic in meta.topics and dlq not in meta.topics  # not even listed
    mine = admin.list_topics(topic=dlq, timeout=10).topics[dlq]  # cdckit's own principal sees it
    assert mine.error is None and len(mine.partitions) == 1
    listed = cli("dlq", "list", "-c", str(path))  # cdckit itself reads its letters
    assert listed.returncode == 0 and "decode" in listed.stdout, listed.stdout + listed.stderr
    owner.close()
