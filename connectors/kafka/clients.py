"""Every Kafka client cdckit makes, from one place, and what cdckit asks the admin client (below:
which topics exist, their ids and settings, creating one).

`conf` is the config's librdkafka settings (pipelines/config.py `KafkaConfig.client_config`:
brokers, security, log level), each kind adds what all of its uses need, and a use adds only its
own settings."""
from __future__ import annotations

import os
import re
import threading
from typing import Any

from connectors.kafka.broker_errors import KafkaUnavailable


def consumer(conf: dict[str, Any], group: str, **settings: Any):
    """A consumer that assigns partitions itself and never commits offsets to its group (cdckit's
    positions live in checkpoints and stores, not in consumer groups)."""
    from confluent_kafka import Consumer

    return Consumer({**conf, "group.id": group, "enable.auto.commit": False, **_dotted(settings)})


def producer(conf: dict[str, Any], **settings: Any):
    from confluent_kafka import Producer

    return Producer({**conf, **_dotted(settings)})


def admin(conf: dict[str, Any], **settings: Any):
    from confluent_kafka.admin import AdminClient

    return AdminClient({**conf, **_dotted(settings)})


def _dotted(settings: dict[str, Any]) -> dict[str, Any]:
    """librdkafka's names are dotted: `fetch_wait_max_ms=10` is `fetch.wait.max.ms`; names that are
    not (error_cb, logger, log_level) stay as they are."""
    keep = {"error_cb", "logger", "log_level", "stats_cb", "throttle_cb", "oauth_cb", "on_delivery", "on_commit"}
    return {k if k in keep else k.replace("_", "."): v for k, v in settings.items()}


# Topic administration.

def _admin(conf: dict[str, Any]):
    return admin(conf)


_kept: dict[tuple, Any] = {}
_kept_lock = threading.Lock()


def _kept_admin(conf: dict[str, Any]):
    """A client kept per process and config, for calls made every micro-batch: a new client's
    connection costs ~60 ms of the batch, a kept one answers in ~3 ms. Per process: a librdkafka
    client does not survive a fork."""
    key = (os.getpid(), tuple(sorted((k, str(v)) for k, v in conf.items())))
    with _kept_lock:
        if key not in _kept:
            _kept[key] = _admin(conf)
        return _kept[key]


def drop_kept_admins() -> None:
    """Let go of this process's kept clients (collected, they close): for a process that outlives
    its broker (the test session), whose clients would otherwise log their reconnect attempts."""
    with _kept_lock:
        _kept.clear()


def topic_names(conf: dict[str, Any]) -> dict[str, Any]:
    """name -> metadata of every topic the broker has (raises KafkaException when it does not answer)."""
    return _admin(conf).list_topics(timeout=10).topics


def existing_topics(conf: dict[str, Any], topics: list[str]) -> list[str]:
    """Those of `topics` that exist, in their order."""
    existing = topic_names(conf)
    return [t for t in topics if t in existing]


def matching_topics(conf: dict[str, Any], pattern: str) -> list[str]:
    """The existing topics whose whole name matches the pattern."""
    compiled = re.compile(pattern)
    return [t for t in topic_names(conf) if compiled.fullmatch(t)]


def topic_ids(conf: dict[str, Any], pattern: str) -> dict[str, str]:
    """name -> topic id of the existing topics matching the pattern (a recreated topic gets a new one)."""
    from confluent_kafka import KafkaException, TopicCollection

    client = _kept_admin(conf)
    try:
        names = [t for t in client.list_topics(timeout=10).topics if re.fullmatch(pattern, t)]
        if not names:
            return {}
        futures = client.describe_topics(TopicCollection(names), request_timeout=10)
        out = {}
        for name, future in futures.items():
            try:
                out[name] = str(future.result().topic_id)
            except KafkaException:
                continue  # deleted between the two calls: absent
        return out
    except KafkaException as exc:
        raise KafkaUnavailable(f"kafka did not answer a topic description: {exc}") from None


def topic_setting(conf: dict[str, Any], topic: str, name: str) -> str | None:
    """One setting of a topic (e.g. cleanup.policy) as the broker reports it."""
    from confluent_kafka.admin import ConfigResource

    client = _admin(conf)  # held until the answer is in: a collected client destroys its pending requests
    entries = list(client.describe_configs([ConfigResource("topic", topic)]).values())[0].result(10)
    return entries[name].value


def min_delete_retention(conf: dict[str, Any], topics: list[str]) -> int | None:
    """The smallest delete.retention.ms of these topics: how long a tombstone outlives compaction."""
    from confluent_kafka.admin import ConfigResource

    if not topics:
        return None
    client = _admin(conf)
    values = []
    for res, fut in client.describe_configs([ConfigResource("topic", t) for t in topics]).items():
        entry = fut.result(10).get("delete.retention.ms")
        if entry is not None and entry.value is not None:
            values.append(int(entry.value))
    return min(values) if values else None


# Records of a kept topic are never deleted: not by age (the broker's log.retention.hours default
# would drop them after 7 days) nor by size. Not compacted either: two letters of a key both count.
KEPT_TOPIC_CONFIG = {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"}


def ensure_topic(kafka_conf: dict, topic: str, partitions: int = 1) -> None:
    """Create a topic of kept records, unless it exists: the dead-letter topic, where every
    letter matters until `cdckit dlq replay` has dealt with it."""
    from confluent_kafka.admin import NewTopic

    client = _admin(kafka_conf)
    if topic in client.list_topics(timeout=10).topics:
        return
    futures = client.create_topics([NewTopic(topic, partitions, config=dict(KEPT_TOPIC_CONFIG))])
    try:
        futures[topic].result(15)
    except Exception as exc:  # noqa: BLE001 - created concurrently by another writer
        if "TOPIC_ALREADY_EXISTS" not in str(exc).upper():
            raise
