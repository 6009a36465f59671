"""`cdckit dlq list|replay`: read the dead-letter topic, and apply its records again after a fix.

Replaying is safe at any time: writes are versioned, so a dead letter older than what a store
holds now is simply stale and changes nothing. Letters that still fail are reported, not written
back (the originals stay in the topic).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from derived.change import DeadLetter
from pipelines.config import Config


@dataclass
class Letter:
    offset: int
    source_topic: str
    source_partition: int
    source_offset: int
    stage: str
    reason: str
    key: bytes | None
    value: bytes | None

    def as_json(self) -> dict[str, Any]:
        return {"offset": self.offset, "source": f"{self.source_topic}[{self.source_partition}]@{self.source_offset}",
                "stage": self.stage, "reason": self.reason,
                "key": None if self.key is None else self.key.decode(errors="replace")[:200],
                "value_bytes": None if self.value is None else len(self.value)}


def read_letters(config: Config, from_offset: int = 0) -> list[Letter]:
    from pipelines.kafka_source import end_offsets

    conf = config.kafka.client_config()
    topic = config.dead_letter_topic
    end = int(end_offsets(conf, [topic]).get(topic, {}).get("0", 0))
    letters: list[Letter] = []
    if end <= from_offset:
        return letters
    from confluent_kafka import Consumer, TopicPartition

    # The reasons travel in headers, which the Spark source does not carry: read with a plain consumer.
    c = Consumer({**conf, "group.id": "cdckit-dlq", "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, from_offset)])
    try:
        while not letters or letters[-1].offset < end - 1:
            msgs = c.consume(1000, 5)
            if not msgs:
                break
            for m in msgs:
                if m.error() is not None or m.offset() >= end:
                    continue
                h = {k: (v or b"").decode(errors="replace") for k, v in (m.headers() or [])}
                letters.append(Letter(m.offset(), h.get("cdckit.source.topic", ""),
                                      int(h.get("cdckit.source.partition", 0)), int(h.get("cdckit.source.offset", -1)),
                                      h.get("cdckit.stage", ""), h.get("cdckit.reason", ""), m.key(), m.value()))
    finally:
        c.close()
    return letters


class _Collect:
    def __init__(self) -> None:
        self.failed: list[DeadLetter] = []

    def write(self, letters) -> int:
        self.failed.extend(letters)
        return 0


def replay(config: Config, letters: list[Letter]) -> dict[str, Any]:
    """Apply the letters' original records to the live stores, in their source order."""
    from pipelines.apply_batch import apply_records, stores_from_config
    from pipelines.fences import FenceStore

    stores = stores_from_config(config)
    fences = FenceStore(config.spark.checkpoint_dir).before(1 << 62)
    rows = [{"key": x.key, "value": x.value, "topic": x.source_topic, "partition": x.source_partition,
             "offset": x.source_offset} for x in letters if x.value is not None]
    collect = _Collect()
    stats = apply_records(rows, stores, dict(fences), collect) if rows else None
    failed = {(d.position.topic, d.position.partition, d.position.offset): d.reason for d in collect.failed}
    return {"letters": len(letters), "replayed": len(rows), "without_payload": len(letters) - len(rows),
            "search_applied": stats.search_applied if stats else 0, "cache_applied": stats.cache_applied if stats else 0,
            "stale": (stats.search_stale + stats.cache_stale) if stats else 0,
            "still_failing": [{"source": f"{t}[{p}]@{o}", "reason": r} for (t, p, o), r in failed.items()]}
