"""Every Kafka client comes from connectors/kafka/clients.py: the settings each kind adds, and no
other module of the shipped code building one itself."""
import ast
from pathlib import Path

import confluent_kafka

from connectors.kafka import clients

ROOT = Path(__file__).resolve().parents[3]
CLIENT_CLASSES = {"Consumer", "Producer", "AdminClient"}


def test_a_consumer_never_commits_to_its_group_and_a_use_adds_its_own_settings(monkeypatch):
    made = []
    monkeypatch.setattr(confluent_kafka, "Consumer", lambda conf: made.append(conf) or conf)
    conf = {"bootstrap.servers": "b:1", "log_level": 3}
    clients.consumer(conf, "g", fetch_wait_max_ms=10, auto_offset_reset="error", error_cb=print)
    assert made == [{"bootstrap.servers": "b:1", "log_level": 3, "group.id": "g", "enable.auto.commit": False,
                     "fetch.wait.max.ms": 10, "auto.offset.reset": "error", "error_cb": print}]
    assert conf == {"bootstrap.servers": "b:1", "log_level": 3}   # the config's settings are not changed


def test_no_other_module_builds_a_kafka_client():
    builders = []
    for folder in ("connectors", "derived", "pipelines"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name == "clients.py" and path.parent.name == "kafka" or "devstack" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call):
                    name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                    if name in CLIENT_CLASSES:
                        builders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not builders, builders


# The dead-letter topic is created to keep its letters: no age or size retention, no compaction.

class _Future:
    def result(self, timeout):
        return None


class _Admin:
    def __init__(self, existing):
        self.existing, self.created = existing, []

    def list_topics(self, timeout):
        return type("Meta", (), {"topics": {t: None for t in self.existing}})()

    def create_topics(self, topics):
        self.created.extend(topics)
        return {t.topic: _Future() for t in topics}


def test_dead_letter_topic_is_created_without_retention(monkeypatch):
    fake = _Admin(existing=[])
    monkeypatch.setattr(clients, "_admin", lambda conf: fake)
    clients.ensure_topic({}, "cdc.dlq")
    (topic,) = fake.created
    assert topic.topic == "cdc.dlq"
    assert topic.config == {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"}


def test_an_existing_topic_is_left_alone(monkeypatch):
    fake = _Admin(existing=["cdc.dlq"])
    monkeypatch.setattr(clients, "_admin", lambda conf: fake)
    clients.ensure_topic({}, "cdc.dlq")
    assert fake.created == []
