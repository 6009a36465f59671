"""The Python Kafka source against the real broker: gaps, end offsets, options, lost ranges."""
import json
import re
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from connectors.kafka.ranges import KafkaRange, read_range
from pipelines.spark.kafka_source import KafkaStreamReader

pytestmark = pytest.mark.integration


def make_topic(bootstrap: str, partitions: int = 1) -> str:
    topic = f"src_{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(10)
    return topic


def produce(bootstrap: str, topic: str, values: list[bytes | None], partition: int = 0, transactional=False):
    conf = {"bootstrap.servers": bootstrap}
    if transactional:
        conf["transactional.id"] = topic
    p = Producer(conf)
    if transactional:
        p.init_transactions()
    for v in values:
        if transactional:
            p.begin_transaction()
        p.produce(topic, key=b"k", value=v, partition=partition)
        if transactional:
            p.commit_transaction()
    p.flush(10)


def rows(batches):
    out = []
    for b in batches:
        out.extend(b.to_pylist())
    return out


def test_gaps_are_not_errors_and_end_is_the_high_watermark(stack):
    topic = make_topic(stack.bootstrap_servers)
    # Each transaction's commit marker takes an offset: records at 0, 2, 4; high watermark 6.
    produce(stack.bootstrap_servers, topic, [b"a", b"b", None], transactional=True)
    reader = KafkaStreamReader({"subscribe": topic, "kafka.bootstrap.servers": stack.bootstrap_servers})
    # The coordinator answers the commit before its marker is written: the high watermark reaches 6 soon after.
    deadline = time.monotonic() + 10
    while (end := reader.latestOffset({}, None)) != {topic: {"0": 6}} and time.monotonic() < deadline:
        time.sleep(0.1)
    assert end == {topic: {"0": 6}}
    got = rows(read_range(reader.conf, KafkaRange(topic, 0, 0, 6), poll_timeout_s=10))
    assert [(r["offset"], r["value"]) for r in got] == [(0, b"a"), (2, b"b"), (4, None)]
    reader.stop()


def test_range_the_broker_cannot_serve_fails_loudly(stack):
    topic = make_topic(stack.bootstrap_servers)
    produce(stack.bootstrap_servers, topic, [b"a", b"b"])
    with pytest.raises(RuntimeError, match="log ends at 2"):
        list(read_range({"bootstrap.servers": stack.bootstrap_servers}, KafkaRange(topic, 0, 0, 10), 10))
    with pytest.raises(RuntimeError, match="can no longer be served|log ends"):
        list(read_range({"bootstrap.servers": stack.bootstrap_servers}, KafkaRange(topic, 0, 50, 60), 10))


def test_pattern_starting_offsets_and_admission_control(stack):
    topic = make_topic(stack.bootstrap_servers, partitions=2)
    produce(stack.bootstrap_servers, topic, [b"x"] * 10, partition=0)
    produce(stack.bootstrap_servers, topic, [b"y"] * 30, partition=1)
    # A pattern that matches this topic alone: "src_xx.*" also took other tests' topics now and then.
    opts = {"subscribepattern": f"{re.escape(topic[:-1])}.",
            "kafka.bootstrap.servers": stack.bootstrap_servers, "maxoffsetspertrigger": "20",
            "startingoffsets": json.dumps({topic: {"0": 4, "1": -2}})}
    reader = KafkaStreamReader(opts)
    start = reader.initialOffset()
    assert start[topic] == {"0": 4, "1": 0}
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    taken = sum(end[topic][p] - start[topic][p] for p in ("0", "1"))
    assert 0 < taken <= 21 and end[topic]["1"] > end[topic]["0"] - 4
    ranges = reader.partitions(start, end)
    assert {(r.partition, r.start) for p in ranges for r in p.ranges} == {(0, 4), (1, 0)}
    reader.stop()
