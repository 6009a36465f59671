"""Kafka over SASL_SSL (SCRAM-SHA-512) for every client cdckit has: its own librdkafka clients, the
Java settings Spark's built-in kafka source and a Kafka Connect worker get, and the up-front check's
one-line refusals (wrong password, a CA that did not sign the broker's certificate, PLAINTEXT on the
TLS port).

The package's secure broker and Connect worker (tests/integration/secure/conftest.py; certificates made by
trustme at start), shared with test_secure_pipeline.py, not the shared `stack`.
"""
import copy
import os
import time
import uuid

import pytest
import requests

from pipelines.config import parse_config
from tests.support.configs import BASE
from tests.support.integration import cli, wait_for, write_config

pytestmark = pytest.mark.integration
PW_ENV = "CDCKIT_TEST_KAFKA_PW"
WRONG = "Wr0ngKafkaPassw0rd"


@pytest.fixture(scope="module")
def broker(secure_broker):
    """The package's secure broker (tests/integration/secure/conftest.py); the password in PW_ENV."""
    os.environ[PW_ENV] = secure_broker.password
    return secure_broker


def config_data(broker, tmp_path, **kafka_overrides):
    """A whole cdckit config: this broker, and stores nothing listens for (never reached when
    Kafka refuses; the first thing to fail when it does not)."""
    data = copy.deepcopy(BASE)
    data["kafka"] = broker.kafka_config(**kafka_overrides)
    data["search"]["url"] = "http://127.0.0.1:9"
    data["redis"]["url"] = "redis://127.0.0.1:9/0"
    data["spark"] = {"checkpoint_dir": str(tmp_path / "ckpt")}
    return data


def _topic_config(admin, resource):
    """The topic's config, or None while the broker does not know the topic yet (a describe right
    after the create can come before the broker's metadata has it)."""
    from confluent_kafka import KafkaException

    try:
        return list(admin.describe_configs([resource]).values())[0].result(30)
    except KafkaException as exc:
        if "UNKNOWN_TOPIC_OR_PART" in str(exc):
            return None
        raise


@pytest.fixture(scope="module")
def compacted_topic(broker, tmp_path_factory):
    """A compacted topic written and read by cdckit's own clients (librdkafka) over SASL_SSL."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    kafka = parse_config(config_data(broker, tmp_path_factory.mktemp("c"))).kafka
    conf = kafka.client_config()
    assert conf["security.protocol"] == "SASL_SSL" and conf["bootstrap.servers"] == broker.bootstrap_servers
    topic = f"sasl-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})])[topic].result(30)
    policy = wait_for(lambda: _topic_config(admin, ConfigResource("topic", topic)), 30, 0.2,
                      "the new topic's config")["cleanup.policy"]
    assert policy.value == "compact"

    records = [(b"k1", b"v1"), (b"k2", b"v2"), (b"k1", b"v1-again")]
    producer = Producer(conf)
    for key, value in records:
        producer.produce(topic, value=value, key=key)
    assert producer.flush(30) == 0

    consumer = Consumer({**conf, "group.id": f"sasl-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got, deadline = [], time.monotonic() + 30
        while len(got) < len(records) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append((msg.key(), msg.value()))
    finally:
        consumer.close()
    assert got == records
    return topic, records


def test_cdckit_clients_produce_and_consume_a_compacted_topic(compacted_topic):
    topic, records = compacted_topic  # the fixture did it, asserting each step
    assert topic and len(records) == 3


@pytest.mark.spark
def test_spark_builtin_kafka_source_reads_with_the_java_settings(broker, compacted_topic, spark, tmp_path):
    """`spark.kafka_source: jvm`: Spark's own kafka source with KafkaConfig.java_client_config()
    as `kafka.*` options (JAAS line, PEM trust store), as pipelines/streaming/job.py passes them."""
    topic, records = compacted_topic
    java = parse_config(config_data(broker, tmp_path)).kafka.java_client_config()
    assert java["ssl.truststore.type"] == "PEM" and "ScramLoginModule" in java["sasl.jaas.config"]
    reader = spark.read.format("kafka").option("subscribe", topic).option("startingOffsets", "earliest")
    for key, value in java.items():
        reader = reader.option(f"kafka.{key}", value)
    rows = reader.load().orderBy("offset").select("key", "value").collect()
    assert [(bytes(r.key), bytes(r.value)) for r in rows] == records


def test_connect_worker_runs_with_all_its_clients_on_sasl_ssl(broker, secure_connect, tmp_path):
    """A distributed worker whose own clients and producer./consumer./admin. ones use the Java
    settings: it joins its group and creates its internal (compacted) topics over SASL_SSL."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    kafka = parse_config(config_data(broker, tmp_path)).kafka
    connect = secure_connect  # the package's worker, started with kafka.java_client_config() as here
    url = connect.s.connect_url
    deadline, listed = time.monotonic() + 180, None
    while time.monotonic() < deadline:  # 200 once the herder has joined the group and read its config topic
        try:
            listed = requests.get(f"{url}/connectors", timeout=10)
        except requests.RequestException:
            listed = None
        if listed is not None and listed.status_code == 200:
            break
        time.sleep(1)
    assert listed is not None and listed.status_code == 200, connect.log.read_text()[-3000:]
    assert listed.json() == []
    root = requests.get(f"{url}/", timeout=10).json()
    assert root["version"].startswith("4.")

    admin = AdminClient(kafka.client_config())
    internal = [f"cdckit-connect-{kind}" for kind in ("configs", "offsets", "status")]
    # The REST API can answer before the worker has created all three (seen once in CI: the config
    # topic missing a moment after the answer), and a broker lists a new topic a moment after it
    # created it: the topics are awaited, then checked.
    deadline = time.monotonic() + 60
    while True:
        topics = admin.list_topics(timeout=10).topics
        if set(internal) <= set(topics) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert set(internal) <= set(topics), (sorted(topics), connect.log.read_text()[-3000:])
    for topic in internal:
        entries = list(admin.describe_configs([ConfigResource("topic", topic)]).values())[0].result(10)
        assert entries["cleanup.policy"].value == "compact"
    assert "sasl.jaas.config=" in (connect.home / "worker.properties").read_text()
    assert "security.protocol=PLAINTEXT" not in (connect.home / "worker.properties").read_text()


def test_the_right_settings_pass_the_kafka_check(broker, tmp_path):
    """The up-front check gets past Kafka: what stops it is the next endpoint (search, not there)."""
    from pipelines.errors import EndpointUnreachable
    from pipelines.ops import preflight

    with pytest.raises(EndpointUnreachable, match=r"^search at http://127\.0\.0\.1:9 is unreachable"):
        preflight.check_servers(parse_config(config_data(broker, tmp_path)))


@pytest.mark.parametrize("case,fields,says", [
    ("wrong password", "kafka.sasl_username / kafka.sasl_password", "refused the credentials"),
    ("unknown CA", "kafka.ssl_ca_location", "presents a TLS certificate that the CA in"),
    ("plaintext", "kafka.security_protocol", "does not speak PLAINTEXT on that port"),
    # More of the same kind: each names its own field.
    ("tls without sasl", "kafka.security_protocol, kafka.sasl_*", "closed the SSL connection before any request"),
    ("other mechanism", "kafka.sasl_mechanism", "does not offer SASL mechanism SCRAM-SHA-256"),
    ("sasl_ssl on the plaintext listener", "kafka.security_protocol", "does not speak SASL_SSL on that port"),
])
def test_refusals_are_one_line_naming_the_endpoint_and_the_field(broker, tmp_path, case, fields, says):
    """Through `cdckit run`, as a user meets them: exit 3, one line on stderr, no password shown,
    within seconds (a refusal that says why ends the check's wait for the broker)."""
    env = {PW_ENV: broker.password}
    endpoint = broker.bootstrap_servers
    if case == "wrong password":
        env[PW_ENV] = WRONG
        data = config_data(broker, tmp_path)
    elif case == "unknown CA":
        data = config_data(broker, tmp_path, ssl_ca_location=str(broker.other_ca_pem))
    elif case == "plaintext":
        data = config_data(broker, tmp_path, security_protocol="PLAINTEXT")
    elif case == "tls without sasl":
        data = config_data(broker, tmp_path, security_protocol="SSL", sasl_mechanism=None, sasl_username=None,
                           sasl_password=None)
    elif case == "other mechanism":
        data = config_data(broker, tmp_path, sasl_mechanism="SCRAM-SHA-256")
    else:
        endpoint = broker.plaintext_bootstrap
        data = config_data(broker, tmp_path, bootstrap_servers=endpoint)
    started = time.monotonic()
    result = cli("run", "-c", str(write_config(tmp_path, data)), env=env, timeout=120)
    took = time.monotonic() - started
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 3, result.stderr[-2000:]
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert f"Kafka at {endpoint} {says}" in line, line
    assert f"(check {fields})" in line, line
    assert broker.password not in result.stdout + result.stderr and WRONG not in result.stdout + result.stderr
    assert not (tmp_path / "ckpt" / "query").exists()  # nothing started
    assert took < 30, f"{case}: {took:.0f} s"
