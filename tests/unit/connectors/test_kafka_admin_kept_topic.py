"""The dead-letter topic is created to keep its letters: no age or size retention, no compaction."""
from connectors.kafka import admin


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
    monkeypatch.setattr(admin, "_admin", lambda conf: fake)
    admin.ensure_topic({}, "cdc.dlq")
    (topic,) = fake.created
    assert topic.topic == "cdc.dlq"
    assert topic.config == {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"}


def test_an_existing_topic_is_left_alone(monkeypatch):
    fake = _Admin(existing=["cdc.dlq"])
    monkeypatch.setattr(admin, "_admin", lambda conf: fake)
    admin.ensure_topic({}, "cdc.dlq")
    assert fake.created == []
