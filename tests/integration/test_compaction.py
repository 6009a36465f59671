"""The local broker is Apache Kafka: it refuses what production refuses and really compacts the
change topics (the test stack makes its cleaner act within seconds: tests/support/stack.py)."""
import uuid

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from tests.support.integration import by_key, cli, drop_connector, pg, read_topic, wait_for, wait_streaming, write_config

pytestmark = pytest.mark.integration


def test_a_keyless_record_on_a_compacted_topic_is_refused(stack):
    topic = f"compact{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": stack.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})])[topic].result(15)
    outcomes = []
    producer = Producer({"bootstrap.servers": stack.bootstrap_servers, "retries": 0})
    producer.produce(topic, value=b'{"op": "t"}', on_delivery=lambda err, msg: outcomes.append(err))
    producer.flush(15)  # its own batch: the broker refuses a batch as a whole
    producer.produce(topic, key=b'{"id": 1}', value=b"{}", on_delivery=lambda err, msg: outcomes.append(err))
    producer.flush(15)
    keyless, keyed = outcomes
    assert keyless is not None and keyless.code() == KafkaError.INVALID_RECORD
    assert keyed is None
    admin.delete_topics([topic])


def test_the_broker_compacts_a_change_topic(stack, tmp_path):
    """Deleted keys keep only their tombstone (the op=d record is compacted away), updated keys only
    their last record; after delete.retention.ms the tombstones go too."""
    name = f"cmp_{uuid.uuid4().hex[:6]}"
    table = f"public.{name}"
    with pg(stack) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, n int)")
    data = stack.config(tables=[{"name": table, "redis_key": f"{name}:{{id}}", "index": name}])
    path = write_config(tmp_path, data)
    topic = f"{data['topic_prefix']}.{table}"
    try:
        assert cli("connector", "apply", "-c", str(path)).returncode == 0
        wait_streaming(stack, data)
        with pg(stack) as conn:
            conn.execute(f"INSERT INTO {table} SELECT g, 0 FROM generate_series(1, 30) g")
            conn.execute(f"DELETE FROM {table} WHERE id <= 10")
            conn.execute(f"UPDATE {table} SET n = 1 WHERE id > 20")
        full = by_key(read_topic(stack.bootstrap_servers, topic, expect=30 + 20 + 10))
        assert full['{"id": 1}'] == ["c", "d", None] and full['{"id": 21}'] == ["c", "u"]
        # The cleaner stamps a tombstone with its removal time when it first compacts it: a short
        # retention must be set before that.
        admin = AdminClient({"bootstrap.servers": stack.bootstrap_servers})
        resource = ConfigResource("topic", topic, incremental_configs=[
            ConfigEntry("delete.retention.ms", "3000", incremental_operation=AlterConfigOpType.SET)])
        list(admin.incremental_alter_configs([resource]).values())[0].result(15)

        def poke():
            # New records roll segments (segment.ms) and dirty the log, so the cleaner runs.
            with pg(stack) as conn:
                conn.execute(f"UPDATE {table} SET n = n + 1 WHERE id BETWEEN 11 AND 20")
            return by_key(read_topic(stack.bootstrap_servers, topic, expect=10**6, timeout_s=2))

        def compacted():
            ops = poke()
            deleted = [ops.get(f'{{"id": {i}}}') for i in range(1, 11)]
            return all(d == [None] for d in deleted) and all(ops[f'{{"id": {i}}}'] == ["u"] for i in range(21, 31))

        wait_for(compacted, 120, 0.2, "the cleaner to compact the change topic")
        wait_for(lambda: not any(f'{{"id": {i}}}' in poke() for i in range(1, 11)), 120, 0.5,
                 "the tombstones to be removed after delete.retention.ms")
    finally:
        drop_connector(stack, data)


def test_a_recreated_topic_is_told_apart_by_its_id(stack, tmp_path):
    """Offsets cannot tell a recreated topic whose log grew past the checkpoint's position from
    the old one; its id can (pipelines/state/topic_ids.py)."""
    from connectors.kafka.clients import topic_ids as current_ids
    from pipelines.state.topic_ids import TopicIds

    prefix = f"ids{uuid.uuid4().hex[:6]}"
    topic = f"{prefix}.public.t"
    conf = {"bootstrap.servers": stack.bootstrap_servers}
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(15)
    ids = TopicIds(tmp_path)
    # a broker may list or describe a just-created topic a moment after the controller created it
    wait_for(lambda: topic in current_ids(conf, rf"{prefix}\..*"), 30, 0.5, "the topic described")
    first = current_ids(conf, rf"{prefix}\..*")
    assert set(first) == {topic}
    ids.learn(first)
    assert ids.recreated(current_ids(conf, rf"{prefix}\..*")) == []
    admin.delete_topics([topic])[topic].result(15)
    wait_for(lambda: topic not in admin.list_topics(timeout=10).topics, 30, 0.5, "the topic deleted")
    wait_for(lambda: _created(admin, topic), 30, 0.5, "the topic created again")
    wait_for(lambda: topic in current_ids(conf, rf"{prefix}\..*"), 30, 0.5, "the new topic described")
    assert TopicIds(tmp_path).recreated(current_ids(conf, rf"{prefix}\..*")) == [topic]  # read back from the file
    admin.delete_topics([topic])


def _created(admin, topic) -> bool:
    try:
        admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(15)
        return True
    except Exception:  # noqa: BLE001 - the deletion is still in progress
        return False
