"""The dead-letter topic: a record that cannot be decoded or applied goes there, with the reason."""
from __future__ import annotations

from typing import Iterable

from derived.change import DeadLetter


class DeadLetterWriter:
    def __init__(self, kafka_conf: dict, topic: str):
        from confluent_kafka import Producer

        self.topic = topic
        ensure_topic(kafka_conf, topic)
        self._producer = Producer({**kafka_conf, "linger.ms": 5, "enable.idempotence": False})
        self._errors: list[str] = []

    def _delivered(self, err, _msg) -> None:
        if err is not None:
            self._errors.append(str(err))

    def write(self, letters: Iterable[DeadLetter]) -> int:
        """Produce and wait for every letter; raises if any is not acknowledged (the batch is retried)."""
        count = 0
        for dl in letters:
            headers = {"cdckit.reason": dl.reason, "cdckit.stage": dl.stage,
                       "cdckit.source.topic": dl.position.topic,
                       "cdckit.source.partition": str(dl.position.partition),
                       "cdckit.source.offset": str(dl.position.offset), **{f"cdckit.{k}": v for k, v in dl.extra.items()}}
            self._producer.produce(self.topic, key=dl.key, value=dl.value,
                                   headers=[(k, v.encode()) for k, v in headers.items()], on_delivery=self._delivered)
            count += 1
        if count:
            remaining = self._producer.flush(30)
            if remaining or self._errors:
                from pipelines.spark.kafka_source import KafkaUnavailable

                errors, self._errors = self._errors, []
                # Restartable: the batch is re-run later (nothing of it is committed), so no letter is lost.
                raise KafkaUnavailable(f"dead-letter topic {self.topic}: {remaining} unsent, errors: {errors[:3]}")
        return count


def ensure_topic(kafka_conf: dict, topic: str, partitions: int = 1) -> None:
    """Create the dead-letter topic (one partition, kept, not compacted: every letter matters)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(kafka_conf)
    if topic in admin.list_topics(timeout=10).topics:
        return
    futures = admin.create_topics([NewTopic(topic, partitions, config={"cleanup.policy": "delete"})])
    try:
        futures[topic].result(15)
    except Exception as exc:  # noqa: BLE001 - created concurrently by another writer
        if "TOPIC_ALREADY_EXISTS" not in str(exc).upper():
            raise
