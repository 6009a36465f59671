"""Every Kafka client cdckit makes, from one place: `conf` is the config's librdkafka settings
(pipelines/config.py `KafkaConfig.client_config`: brokers, security, log level), each kind adds
what all of its uses need, and a use adds only its own settings."""
from __future__ import annotations

from typing import Any


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
