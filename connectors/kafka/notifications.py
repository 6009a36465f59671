"""Debezium's notifications topic (the connector's `sink` notification channel): which incremental
snapshots have ended. A COMPLETED notification of aggregate type "Incremental Snapshot" carries the
id of the execute-snapshot signal that started it, and comes after every row of that snapshot was
handed to Kafka Connect. Keyed by that id, so a compacted topic keeps each snapshot's last word."""
from __future__ import annotations

import json
from typing import Any, Iterable

INCREMENTAL = "Incremental Snapshot"


def completed(records: Iterable[tuple[bytes | None, bytes | None]]) -> set[str]:
    """The signal ids whose incremental snapshot completed, from (key, value) records in order."""
    done: set[str] = set()
    for _, value in records:
        try:
            body = json.loads(value) if value else None
        except ValueError:
            continue
        if isinstance(body, dict) and "payload" in body and "schema" in body:
            body = body["payload"]
        if isinstance(body, dict) and body.get("aggregate_type") == INCREMENTAL and body.get("type") == "COMPLETED":
            done.add(str(body.get("id")))
    return done


def completed_snapshots(conf: dict[str, Any], topic: str, timeout_s: float = 10) -> set[str]:
    """The topic read to its end now; no topic yet: nothing completed."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**conf, "group.id": "cdckit-notifications", "enable.auto.commit": False})
    try:
        meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if meta is None or meta.error is not None or not meta.partitions:
            return set()
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)[1]
                for p in meta.partitions}
        left = {p for p, end in ends.items() if end > 0}
        if not left:
            return set()
        consumer.assign([TopicPartition(topic, p, 0) for p in left])
        records: list[tuple[bytes | None, bytes | None]] = []
        idle = 0
        while left and idle < int(timeout_s / 0.5):
            msg = consumer.poll(0.5)
            if msg is None:
                idle += 1
                continue
            if msg.error() is not None:
                continue
            records.append((msg.key(), msg.value()))
            if msg.offset() >= ends[msg.partition()] - 1:
                left.discard(msg.partition())
        return completed(records)
    finally:
        consumer.close()
