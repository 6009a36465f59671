"""The dead-letter topic: a record that cannot be decoded or applied goes there with the reason
in its headers; `cdckit dlq` reads the letters back."""
from __future__ import annotations

from dataclasses import dataclass
from contextlib import closing
from typing import Any, Iterable, Iterator

from connectors.kafka import clients
from connectors.kafka.broker_errors import KafkaUnavailable
from connectors.kafka.clients import ensure_topic
from connectors.kafka.offsets import end_offsets
from derived.change import DeadLetter


DROPPED = "cdckit.value.dropped"  # header: the record had a value, left out (dlq.include_values: false)


class DeadLetterWriter:
    """The dead-letter sink of the pipeline: a Kafka producer."""

    def __init__(self, kafka_conf: dict, topic: str, include_values: bool = True):
        self.topic = topic
        # Without values a letter holds no row image (personal data stays in the change topics,
        # whose access and retention are already governed); replay never needs it.
        self.include_values = include_values
        # One partition, kept, not compacted: every letter matters.
        ensure_topic(kafka_conf, topic)
        self._producer = clients.producer(kafka_conf, linger_ms=5, enable_idempotence=False)
        self._errors: list[str] = []

    def _delivered(self, err, _msg) -> None:
        if err is not None:
            self._errors.append(str(err))

    def write(self, letters: Iterable[DeadLetter]) -> int:
        """Produce and wait for every letter; raises if any is not acknowledged (the batch is retried)."""
        count = 0
        for dl in letters:
            value = dl.value if self.include_values else None
            headers = {"cdckit.reason": dl.reason, "cdckit.stage": dl.stage,
                       "cdckit.source.topic": dl.position.topic,
                       "cdckit.source.partition": str(dl.position.partition),
                       "cdckit.source.offset": str(dl.position.offset), **{f"cdckit.{k}": v for k, v in dl.extra.items()},
                       **({DROPPED: "true"} if value is None and dl.value is not None else {})}
            self._producer.produce(self.topic, key=dl.key, value=value,
                                   headers=[(k, v.encode()) for k, v in headers.items()], on_delivery=self._delivered)
            count += 1
        if count:
            remaining = self._producer.flush(30)
            if remaining or self._errors:
                errors, self._errors = self._errors, []
                # Restartable: the batch is re-run later (nothing of it is committed), so no letter is lost.
                raise KafkaUnavailable(f"dead-letter topic {self.topic}: {remaining} unsent, errors: {errors[:3]}")
        return count


@dataclass
class Letter:
    """A dead letter as read back: where its record came from, why it was refused, the record."""

    offset: int
    source_topic: str
    source_partition: int
    source_offset: int
    stage: str
    reason: str
    key: bytes | None
    value: bytes | None
    value_dropped: bool = False
    version: str | None = None   # a nested document's letter: the version it was written at

    def as_json(self) -> dict[str, Any]:
        return {"offset": self.offset, "source": f"{self.source_topic}[{self.source_partition}]@{self.source_offset}",
                "stage": self.stage, "reason": self.reason,
                "key": None if self.key is None else self.key.decode(errors="replace")[:200],
                "value_bytes": None if self.value is None else len(self.value), "value_dropped": self.value_dropped}


def _messages(conf: dict[str, Any], topic: str, start: int, end: int) -> Iterator[Any]:
    """The topic's messages of [start, end), read with a plain consumer: the reasons travel in
    headers, which the Spark source does not carry."""
    from confluent_kafka import TopicPartition

    c = clients.consumer(conf, "cdckit-dlq", auto_offset_reset="earliest")
    c.assign([TopicPartition(topic, 0, start)])
    try:
        position = start
        while position < end:
            msgs = c.consume(1000, 5)
            if not msgs:
                break
            for m in msgs:
                if m.error() is not None or m.offset() >= end:
                    continue
                position = m.offset() + 1
                yield m
    finally:
        c.close()


def read_letters(conf: dict[str, Any], topic: str, from_offset: int = 0) -> list[Letter]:
    """The letters of the topic from an offset to its end now."""
    letters: list[Letter] = []
    for m in _messages(conf, topic, from_offset, topic_end(conf, topic)):
        h = {k: (v or b"").decode(errors="replace") for k, v in (m.headers() or [])}
        letters.append(Letter(m.offset(), h.get("cdckit.source.topic", ""),
                              int(h.get("cdckit.source.partition", 0)), int(h.get("cdckit.source.offset", -1)),
                              h.get("cdckit.stage", ""), h.get("cdckit.reason", ""), m.key(), m.value(),
                              h.get(DROPPED) == "true", h.get("cdckit.version")))
    return letters


@dataclass
class LetterTally:
    """Letters of [start, end) counted per source topic, with each topic's first reason.
    `read` < end - start when the reading stopped at its limit (the rest are not broken down)."""

    start: int
    end: int
    per_topic: dict[str, int]
    first_reason: dict[str, str]
    read: int = 0
    position: int = -1     # the next offset to read (-1: start)

    @property
    def total(self) -> int:
        return max(0, self.end - self.start)   # one partition, never compacted: offsets are letters

    def add(self, source_topic: str, reason: str) -> None:
        self.per_topic[source_topic] = self.per_topic.get(source_topic, 0) + 1
        self.first_reason.setdefault(source_topic, reason)
        self.read += 1


def topic_end(conf: dict[str, Any], topic: str) -> int:
    """The dead-letter topic's end offset (0 when it does not exist yet)."""
    return int(end_offsets(conf, [topic]).get(topic, {}).get("0", 0))


def tally_letters(conf: dict[str, Any], topic: str, start: int, end: int | None = None,
                  limit: int = 200_000, tally: LetterTally | None = None) -> LetterTally:
    """Count the letters of [start, end) by source topic (headers only; at most `limit` read).
    Given `tally`, adds to it (a poller reading on from where it stopped)."""
    end = topic_end(conf, topic) if end is None else end
    if tally is None or tally.start != start:
        tally = LetterTally(start, start, {}, {})
    tally.end = max(tally.end, end)
    position = max(start, tally.position)
    if end <= position or tally.read >= limit:
        return tally
    with closing(_messages(conf, topic, position, end)) as messages:  # closed at once when the limit stops it
        for m in messages:
            h = {k: (v or b"").decode(errors="replace") for k, v in (m.headers() or [])
                 if k in ("cdckit.source.topic", "cdckit.reason")}
            tally.add(h.get("cdckit.source.topic", ""), h.get("cdckit.reason", ""))
            position = m.offset() + 1
            if tally.read >= limit:
                break
    tally.position = position
    return tally
