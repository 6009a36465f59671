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
    import time

    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({**conf, "group.id": "cdckit-notifications", "enable.auto.commit": False})
    try:
        meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if meta is None or meta.error is not None or not meta.partitions:
            return set()
        ends = {}
        for p in meta.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
            if high > low:
                ends[p] = high
        if not ends:
            return set()
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        records: list[tuple[bytes | None, bytes | None]] = []
        deadline = time.monotonic() + timeout_s
        left = set(ends)
        # Done by position, not by the last record seen: the end may be a transaction marker, and
        # the log's start may have moved.
        while left and time.monotonic() < deadline:
            for m in consumer.consume(500, 0.2):
                if m.error() is None:
                    records.append((m.key(), m.value()))
            for tp in consumer.position([TopicPartition(topic, p) for p in left]):
                if tp.offset >= ends[tp.partition]:
                    left.discard(tp.partition)
        return completed(records)
    finally:
        consumer.close()
