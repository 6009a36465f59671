"""Issue #2's check, against the real servers: apply the connector, see c/u/d and a tombstone."""
import uuid

import pytest

from connectors.connect_client import ConnectClient
from tests.support.integration import by_key, cli, drop_connector, pg, read_topic, wait_streaming, write_config

pytestmark = pytest.mark.integration


@pytest.fixture
def table_config(stack, tmp_path):
    name = f"cust_{uuid.uuid4().hex[:6]}"
    with pg(stack) as conn:
        conn.execute(f"CREATE TABLE public.{name} (id int PRIMARY KEY, name text, email text)")
    data = stack.config(tables=[{"name": f"public.{name}", "redis_key": "c:{id}"}])
    yield data, write_config(tmp_path, data), f"{data['topic_prefix']}.public.{name}", name
    drop_connector(stack, data)
    with pg(stack) as conn:
        conn.execute(f"DROP TABLE IF EXISTS public.{name}")


def test_apply_streams_changes_into_a_compacted_topic(stack, table_config):
    data, path, topic, table = table_config
    first = cli("connector", "apply", "-c", str(path))
    assert first.returncode == 0, first.stderr
    assert "created" in first.stdout and "+ slot.name=" in first.stdout
    wait_streaming(stack, data)

    with pg(stack) as conn:
        conn.execute(f"INSERT INTO {table} VALUES (1, 'ann', 'a@x'), (2, 'bob', 'b@x')")
        conn.execute(f"UPDATE {table} SET name = 'ann2' WHERE id = 1")
        conn.execute(f"DELETE FROM {table} WHERE id = 2")

    records = read_topic(stack.bootstrap_servers, topic, expect=5)
    assert by_key(records) == {'{"id": 1}': ["c", "u"], '{"id": 2}': ["c", "d", None]}
    assert [v["after"]["name"] for k, v in records if v and v["op"] == "u"] == ["ann2"]

    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": stack.bootstrap_servers})
    described = admin.describe_configs([ConfigResource("topic", topic)])
    entries = list(described.values())[0].result()
    assert entries["cleanup.policy"].value == "compact"
    assert entries["segment.ms"].value == "2000"  # the test stack's fast compaction reached the topic
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 3

    status = cli("connector", "status", "-c", str(path))
    assert status.returncode == 0 and "RUNNING" in status.stdout

    before = ConnectClient(stack.connect_url).get_config(f"{data['topic_prefix']}-postgres")
    second = cli("connector", "apply", "-c", str(path))
    assert second.returncode == 0 and "unchanged" in second.stdout
    assert ConnectClient(stack.connect_url).get_config(f"{data['topic_prefix']}-postgres") == before


def test_changed_config_is_an_update_with_a_masked_diff(stack, table_config, monkeypatch):
    data, path, _, _ = table_config
    assert cli("connector", "apply", "-c", str(path)).returncode == 0
    data["connect"]["heartbeat_interval_ms"] = 3000
    write_config(path.parent, data)
    result = cli("connector", "apply", "-c", str(path))
    assert result.returncode == 0, result.stderr
    assert "updated" in result.stdout
    assert "- heartbeat.interval.ms=2000" in result.stdout and "+ heartbeat.interval.ms=3000" in result.stdout
