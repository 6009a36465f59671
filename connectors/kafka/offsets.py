"""Where the partitions of some topics begin and end, as the driver reads them.

End offsets are read from the high watermark of a Fetch response: Tansu answers ListOffsets(latest)
wrongly.
"""
from __future__ import annotations

import json
import re
import time
from typing import Any

from connectors.kafka import clients
from connectors.kafka.broker_errors import KafkaUnavailable, NoFetchResponse, TopicLost

Offsets = dict[str, dict[str, int]]  # topic -> partition (as str, JSON keys) -> next offset
TopicPartition = tuple[str, int]


class Watermarks:
    """One consumer that never reads a record: it lists the partitions of some topics (by name, or
    by a pattern) and answers where each begins and ends."""

    def __init__(self, conf: dict[str, Any], topics: list[str] | None = None, pattern: re.Pattern | None = None):
        self.conf, self.topics, self.pattern = conf, topics, pattern
        self._consumer = None

    def _meta_consumer(self):
        if self._consumer is None:
            # fetch.wait.max.ms: a fetch at the log's end answers the high watermark; the broker
            # would otherwise hold it up to 500 ms waiting for data, on every micro-batch.
            self._consumer = clients.consumer(self.conf, "cdckit-source-driver", enable_partition_eof=True,
                                              auto_offset_reset="latest", fetch_wait_max_ms=10, log_level=3)
        return self._consumer

    def partitions(self) -> list[TopicPartition]:
        from confluent_kafka import KafkaException

        try:
            md = self._meta_consumer().list_topics(timeout=10)
        except KafkaException as exc:
            raise KafkaUnavailable(f"kafka at {self.conf.get('bootstrap.servers')} did not answer: {exc}") from None
        names = self.topics if self.topics is not None else [t for t in md.topics if self.pattern.fullmatch(t)]
        out = []
        for t in names:
            tm = md.topics.get(t)
            if tm is None or tm.error is not None:
                continue  # not created yet: it joins when it appears
            out.extend((t, p) for p in tm.partitions)
        return sorted(out)

    def high(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """High watermarks from Fetch responses (fetch near the end, wait for partition EOF)."""
        from confluent_kafka import OFFSET_END, KafkaError, TopicPartition as TP

        if not tps:
            return {}
        tps = sorted(set(tps))
        c = self._meta_consumer()
        c.assign([TP(t, p, OFFSET_END) for t, p in tps])
        waiting, out = set(tps), {}
        deadline = time.monotonic() + 30
        while len(out) < len(tps) and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and (msg.error() is None or msg.error().code() == KafkaError._PARTITION_EOF):
                waiting.discard((msg.topic(), msg.partition()))
            # Around a broker restart an EOF can come while the cached high watermark is still
            # unknown (-1): that is no answer yet, not a log that ends at -1.
            for tp in tps:
                if tp not in waiting and tp not in out:
                    high = c.get_watermark_offsets(TP(*tp), cached=True)[1]
                    if high >= 0:
                        out[tp] = high
        c.unassign()
        missing = sorted(set(tps) - set(out))
        if missing:
            raise NoFetchResponse(missing)
        return out

    def low(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        from confluent_kafka import TopicPartition as TP

        c = self._meta_consumer()
        return {(t, p): c.get_watermark_offsets(TP(t, p), timeout=10)[0] for t, p in tps}

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def starting_offsets(marks: Watermarks, starting: str) -> Offsets:
    """`earliest`, `latest`, or JSON offsets per topic and partition (-2: earliest)."""
    tps = marks.partitions()
    if starting == "earliest":
        found = marks.low(tps)
    elif starting == "latest":
        found = marks.high(tps)
    else:
        given = json.loads(starting)
        found = {}
        low = marks.low(tps)
        for t, p in tps:
            o = int(given.get(t, {}).get(str(p), -2))
            found[(t, p)] = low[(t, p)] if o == -2 else o
    return to_offsets(found)


def next_end(start: Offsets | None, high: dict[TopicPartition, int]
             ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """(begin, end) of each partition from `start` to its high watermark. Raises TopicLost when a
    partition's log is behind `start`, or a topic read before is gone."""
    start = start or {}
    begin = {tp: int(start.get(tp[0], {}).get(str(tp[1]), 0)) for tp in high}
    check_not_lost(start, begin, high)
    return begin, {tp: max(high[tp], begin[tp]) for tp in high}


def end_offsets(kafka_conf: dict[str, Any], topics: list[str]) -> Offsets:
    """End offsets (high watermarks from Fetch responses) of these topics, from the driver."""
    marks = Watermarks(kafka_conf, topics)
    try:
        return to_offsets(next_end({}, marks.high(marks.partitions()))[1])
    finally:
        marks.close()


def begin_offsets(kafka_conf: dict[str, Any], topics: list[str]) -> Offsets:
    """Earliest offsets still in the log (a compacted or retention-trimmed log may not start at 0)."""
    marks = Watermarks(kafka_conf, topics)
    try:
        return to_offsets(marks.low(marks.partitions()))
    finally:
        marks.close()


def check_not_lost(start: Offsets, begin: dict[TopicPartition, int], high: dict[TopicPartition, int]) -> None:
    gone = [f"{t} (gone)" for t, parts in start.items()
            if any(int(o) > 0 for o in parts.values()) and not any(tp[0] == t for tp in high)]
    gone += [f"{t}[{p}] ends at {high[(t, p)]}, below {begin[(t, p)]}" for t, p in begin if high[(t, p)] < begin[(t, p)]]
    if gone:
        raise TopicLost(f"change topics behind the pipeline's position: {', '.join(gone[:5])}. The broker lost its "
                        "data or a topic was recreated; recover with `cdckit bootstrap` (it re-snapshots)")


def to_offsets(marks: dict[TopicPartition, int]) -> Offsets:
    out: Offsets = {}
    for (t, p), o in sorted(marks.items()):
        out.setdefault(t, {})[str(p)] = int(o)
    return out


def admit(begin: dict, end: dict, cap: int) -> dict:
    """Spread at most `cap` offsets over partitions, in proportion to what each has waiting."""
    waiting = {tp: end[tp] - begin[tp] for tp in end}
    total = sum(waiting.values())
    if total <= cap:
        return end
    return {tp: begin[tp] + max(1 if waiting[tp] else 0, waiting[tp] * cap // total) for tp in end}
