"""Debezium's notifications topic (the connector's `sink` notification channel): which incremental
snapshots have ended. A COMPLETED notification of aggregate type "Incremental Snapshot" carries the
id of the execute-snapshot signal that started it, and comes after every row of that snapshot was
handed to Kafka Connect. Keyed by that id, so a compacted topic keeps each snapshot's last word."""
from __future__ import annotations

from typing import Any, Iterable

INCREMENTAL = "Incremental Snapshot"


def completed(records: Iterable[tuple[bytes | None, bytes | None]]) -> set[str]:
    """The signal ids whose incremental snapshot completed, from (key, value) records in order."""
    done: set[str] = set()
    from connectors.envelope import RecordError, envelope_of

    for _, value in records:
        try:
            body = envelope_of(value) if value else None   # the schema/payload wrapper off, as for changes
        except RecordError:
            continue
        if isinstance(body, dict) and body.get("aggregate_type") == INCREMENTAL and body.get("type") == "COMPLETED":
            done.add(str(body.get("id")))
    return done


def completed_snapshots(conf: dict[str, Any], topic: str, timeout_s: float = 10) -> set[str]:
    """The topic read to its end now (connectors/kafka/ranges.read_messages: done by position,
    whatever gaps compaction left); no topic yet: nothing completed."""
    from connectors.kafka.clients import existing_topics
    from connectors.kafka.offsets import begin_offsets, end_offsets
    from connectors.kafka.ranges import KafkaRange, read_messages

    if not existing_topics(conf, [topic]):
        return set()
    begin, end = begin_offsets(conf, [topic]).get(topic, {}), end_offsets(conf, [topic]).get(topic, {})
    records: list[tuple[bytes | None, bytes | None]] = []
    for partition, stop in end.items():
        start = int(begin.get(partition, 0))
        if int(stop) > start:
            for msgs in read_messages(conf, KafkaRange(topic, int(partition), start, int(stop)), timeout_s):
                records.extend((m.key(), m.value()) for m in msgs)
    return completed(records)
