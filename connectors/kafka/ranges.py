"""Offset ranges of one partition, the consumers that read them, and the board where the tasks
reading them report how far they got (`ProgressBoard`, at the end).

Compaction leaves gaps in offsets: a range is read until the consumer's position reaches its end,
not until a record with offset end-1 arrives. Consumers are kept per Python process (a Spark
worker, a benchmark) across ranges: creating one and connecting costs more than a small range.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

import pyarrow as pa

from connectors.kafka import clients
from connectors.kafka.broker_errors import KafkaUnavailable, TopicLost

# The records of a range as Arrow batches: the columns of Spark's built-in kafka source.
ARROW_SCHEMA = pa.schema([
    ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
    ("offset", pa.int64()), ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
])
# The ranges themselves, one row each (the Spark source's `ranges` mode).
RANGE_ARROW_SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("start", pa.int64()),
                                ("end", pa.int64())])
STALE_WATERMARK_S = 2.0


@dataclass
class KafkaRange:
    """[start, end) of one partition."""

    topic: str
    partition: int
    start: int
    end: int


def pack_ranges(ranges: list[KafkaRange], tasks: int) -> list[list[KafkaRange]]:
    """At most `tasks` sets of ranges with record counts as even as greedy packing makes them.
    Why: a micro-batch with more tasks than cores runs a second wave of tasks; a heartbeat topic's
    one record must not cost a batch that wave (the largest ranges are placed first, each in the
    lightest set, so the small ones fill in beside them)."""
    sets: list[list[KafkaRange]] = [[] for _ in range(max(1, min(tasks, len(ranges))))]
    loads = [0] * len(sets)
    for r in sorted(ranges, key=lambda r: r.end - r.start, reverse=True):
        i = loads.index(min(loads))
        sets[i].append(r)
        loads[i] += r.end - r.start
    return [s for s in sets if s]


def read_range(conf: dict[str, Any], r: KafkaRange, poll_timeout_s: float = 120,
               chunk: int = 20_000) -> Iterator[pa.RecordBatch]:
    """Records of [start, end) of one partition as Arrow batches of ARROW_SCHEMA."""
    cols: dict[str, list] = {n: [] for n in ARROW_SCHEMA.names}
    for msgs in read_messages(conf, r, poll_timeout_s):
        for m in msgs:
            ts_type, ts = m.timestamp()
            cols["key"].append(m.key())
            cols["value"].append(m.value())
            cols["offset"].append(m.offset())
            cols["timestamp"].append(ts * 1000 if ts and ts > 0 else None)
            cols["timestampType"].append(ts_type)
        if len(cols["offset"]) >= chunk:
            yield _batch(r, cols)
            cols = {n: [] for n in ARROW_SCHEMA.names}
    if cols["offset"]:
        yield _batch(r, cols)


def range_records(conf: dict[str, Any], ranges: Iterable[tuple[str, int, int, int]], timestamps: bool = False,
                  skip: Callable[[str, bytes | None], bool] | None = None) -> Iterator[list[dict[str, Any]]]:
    """The records of each (topic, partition, start, end) range as row dicts (key, value, topic,
    partition, offset; with `timestamps` also the record's time in ms, None when it has none), a
    fetch at a time; `skip(topic, value)` leaves a record out."""
    for topic, partition, start, end in ranges:
        partition = int(partition)
        for msgs in read_messages(conf, KafkaRange(topic, partition, int(start), int(end))):
            if skip is not None:
                msgs = [m for m in msgs if not skip(topic, m.value())]
            if timestamps:
                yield [dict(key=m.key(), value=m.value(), topic=topic, partition=partition, offset=m.offset(),
                            timestamp=ts if (ts := m.timestamp()[1]) > 0 else None) for m in msgs]
            else:
                yield [dict(key=m.key(), value=m.value(), topic=topic, partition=partition, offset=m.offset())
                       for m in msgs]


def _transient_codes() -> frozenset[int]:
    from confluent_kafka import KafkaError

    return frozenset({KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT,
                      KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE})


_TRANSIENT = _transient_codes()


def _log_end(c, r: KafkaRange) -> int | None:
    """The partition's high watermark from the broker now, or None when it does not answer."""
    from confluent_kafka import KafkaException, TopicPartition

    try:
        return c.get_watermark_offsets(TopicPartition(r.topic, r.partition), timeout=5, cached=False)[1]
    except KafkaException:
        return None


def log_end(conf: dict[str, Any], topic: str, partition: int) -> int | None:
    """The partition's high watermark now (through this process's kept reader), or None when the
    broker does not answer."""
    c = _reader(conf)
    try:
        return _log_end(c, KafkaRange(topic, partition, 0, 0))
    finally:
        _release(conf, c, True)


def _partition_exists(c, r: KafkaRange) -> bool:
    """Whether the broker still has the range's partition (True when it does not answer: that is
    an outage, not a loss)."""
    from confluent_kafka import KafkaException

    try:
        meta = c.list_topics(r.topic, timeout=5).topics.get(r.topic)
    except KafkaException:
        return True
    return meta is not None and meta.error is None and r.partition in meta.partitions


def read_messages(conf: dict[str, Any], r: KafkaRange, poll_timeout_s: float = 120) -> Iterator[list]:
    """The consumer's messages of [start, end) of one partition, a list per fetch (no error
    messages, nothing at or past `end`). Offsets may have gaps (compaction, transaction markers):
    the range is done when the consumer's position reaches `end`, not when a record with offset
    end-1 arrives. A range the broker can no longer serve raises."""
    from confluent_kafka import KafkaError, TopicPartition

    tp = TopicPartition(r.topic, r.partition, r.start)
    c = _reader(conf)
    _learn_topic(c, r.topic)
    c.assign([tp])
    healthy = False
    next_offset = r.start
    last_progress = time.monotonic()
    where = f"{r.topic}[{r.partition}]"
    try:
        while next_offset < r.end:
            # consume() waits for its whole timeout unless it fills the batch: ask for no more
            # than the range still holds, so a small micro-batch returns as soon as it arrived.
            msgs = c.consume(max(1, min(10_000, r.end - next_offset)), 0.5)
            if not msgs:
                position = c.position([TopicPartition(r.topic, r.partition)])[0].offset
                if position >= r.end:
                    break
                stalled = time.monotonic() - last_progress
                # No progress for longer than a fetch takes: ask the broker where the log ends (the
                # cached watermark may predate this assignment, or the broker's restart). A broker
                # that does not answer is an outage, not a shorter log.
                high = _log_end(c, r) if stalled > STALE_WATERMARK_S else None
                if high is not None and 0 <= high < r.end and max(position, next_offset) >= high:
                    raise TopicLost(f"{where}: the log ends at {high}, before the range end {r.end} "
                                       f"(the topic was recreated or the broker lost its data: recover with `cdckit bootstrap`)")
                if stalled > STALE_WATERMARK_S and not _partition_exists(c, r):
                    raise TopicLost(f"{where}: the topic or partition no longer exists (it was deleted or the "
                                       f"broker lost its data: recover with `cdckit bootstrap`)")
                if stalled > poll_timeout_s:
                    raise KafkaUnavailable(f"{where}: no record between offsets {next_offset} and {r.end} "
                                           f"within {poll_timeout_s:g} s")
                continue
            last_progress = time.monotonic()
            # Errors librdkafka recovers from by itself (a broker restarting) are reports, not data.
            msgs = [m for m in msgs if m.error() is None or m.error().code() not in _TRANSIENT]
            good = msgs
            for i, m in enumerate(msgs):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if m.offset() < r.end:
                            raise TopicLost(f"{where}: the log ends at {m.offset()}, before the range end "
                                               f"{r.end} (the topic was recreated or the broker lost its data: recover with `cdckit bootstrap`)")
                        good, next_offset = msgs[:i], r.end
                        break
                    raise RuntimeError(f"{where} at offset {next_offset}: {err} "
                                       f"(range {r.start}-{r.end} can no longer be served)")
                if m.offset() >= r.end:
                    good, next_offset = msgs[:i], r.end
                    break
            else:
                next_offset = msgs[-1].offset() + 1
            if good:
                yield good
        healthy = True
    finally:
        _release(conf, c, healthy)


_readers: dict[str, Any] = {}
_known_topics: dict[int, set[str]] = {}   # id(consumer) -> the topics whose metadata it holds


def _learn_topic(c, topic: str) -> None:
    """A consumer assigned a partition of a topic it holds no metadata for fetches nothing until
    librdkafka's next topic scan, up to a second later (measured: ~1.0 s for every new topic of a
    kept reader, ~0.02 s once it knows the topic): the topic's metadata is asked for first."""
    from confluent_kafka import KafkaException

    known = _known_topics.setdefault(id(c), set())
    if topic in known:
        return
    try:
        c.list_topics(topic, timeout=5)
        known.add(topic)
    except KafkaException:   # the fetch finds its own way (or its own error) without it
        pass


def _reader(conf: dict[str, Any]):
    """A consumer kept per Python worker across micro-batches: creating one and connecting costs
    more than a small batch's whole read."""
    key = json.dumps(conf, sort_keys=True, default=str)
    c = _readers.pop(key, None)
    if c is None:
        # fetch.wait.max.ms: a fetch left in flight at a range's log end would otherwise be held by
        # the broker up to 500 ms, and the next range's fetch (next batch, or the same task) waits behind it.
        c = clients.consumer(conf, "cdckit-source-reader", auto_offset_reset="error", enable_partition_eof=True,
                             fetch_max_bytes=52428800, fetch_wait_max_ms=10, log_level=3)
    return c


def _release(conf: dict[str, Any], c, healthy: bool) -> None:
    key = json.dumps(conf, sort_keys=True, default=str)
    if healthy and key not in _readers:
        c.unassign()
        _readers[key] = c
    else:
        _known_topics.pop(id(c), None)
        c.close()


def close_readers() -> None:
    """Close this process's kept range readers (a process that outlives its broker, e.g. a
    benchmark, would otherwise log their reconnect attempts)."""
    while _readers:
        c = _readers.popitem()[1]
        _known_topics.pop(id(c), None)
        c.close()


def _batch(r: KafkaRange, cols: dict[str, list]) -> pa.RecordBatch:
    n = len(cols["offset"])
    cols["topic"], cols["partition"] = [r.topic] * n, [r.partition] * n
    arrays = [pa.array(cols[f.name], type=f.type) if f.name != "timestamp"
              else pa.array(cols["timestamp"], type=pa.int64()).cast(f.type) for f in ARROW_SCHEMA]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


# The progress board.

log = logging.getLogger("cdckit.progress")
# The broker's default offset.metadata.max.bytes is 4096; a report is a few numbers.
MAX_METADATA = 1024


class ProgressBoard:
    """Progress of a distributed job's tasks, kept where every host reaches it: the broker's consumer
    group offsets. Each task commits, for its own topic partition, the position it has read to, and a
    small JSON in the commit's metadata (records read, written, done); the driver reads the group's
    commits to draw progress bars (which partitions are finished it keeps itself). A second group
    (`<group>-stop`) carries the driver's stop request to tasks not yet begun.

    Nothing joins these groups (no rebalance, no member): commits from a consumer outside a generation
    are accepted for a group without members. A failed progress commit never fails a task (progress
    is advisory; a partition whose `done` is lost is done again, idempotently)."""

    def __init__(self, conf: dict[str, Any], group: str):
        self.conf, self.group = conf, group
        self._consumer = None

    def _client(self, group: str | None = None):
        return clients.consumer(self.conf, group or self.group, auto_offset_reset="earliest")

    def _own(self):
        if self._consumer is None:
            self._consumer = self._client()
        return self._consumer

    def report(self, topic: str, partition: int, position: int, **fields: Any) -> bool:
        """Commit `position` (an offset in the partition) and `fields` for one partition; False
        when the broker did not take it."""
        from confluent_kafka import KafkaException, TopicPartition

        body = json.dumps(fields, separators=(",", ":"))
        if len(body) > MAX_METADATA:
            raise ValueError(f"progress report of {len(body)} bytes (at most {MAX_METADATA})")
        try:
            done = self._own().commit(offsets=[TopicPartition(topic, partition, max(0, int(position)),
                                                              metadata=body)], asynchronous=False)
        except KafkaException as exc:
            log.warning("progress of %s-%s not recorded: %s", topic, partition, exc)
            return False
        refused = [tp.error for tp in done or [] if tp.error is not None]
        if refused:
            log.warning("progress of %s-%s not recorded: %s", topic, partition, refused[0])
        return not refused

    def read(self, partitions: list[tuple[str, int]], timeout_s: float = 10) -> dict[str, dict[str, Any]]:
        """`topic-partition` -> the fields last reported (partitions never reported are absent)."""
        from confluent_kafka import TopicPartition

        if not partitions:
            return {}
        out: dict[str, dict[str, Any]] = {}
        for tp in self._own().committed([TopicPartition(t, p) for t, p in partitions], timeout=timeout_s):
            if tp.offset < 0 or tp.error is not None or not tp.metadata:
                continue
            try:
                out[f"{tp.topic}-{tp.partition}"] = json.loads(tp.metadata)
            except ValueError:
                continue
        return out

    def request_stop(self, anchor: tuple[str, int], on: bool = True) -> None:
        """Ask tasks not yet begun to skip their partition (or take that back). `anchor`: any
        partition of the job (the flag is kept as that partition's commit in the stop group)."""
        from confluent_kafka import TopicPartition

        c = self._client(f"{self.group}-stop")
        try:
            c.commit(offsets=[TopicPartition(anchor[0], anchor[1], 1 if on else 0, metadata="stop" if on else "")],
                     asynchronous=False)
        finally:
            c.close()

    def stop_requested(self, anchor: tuple[str, int], timeout_s: float = 10) -> bool:
        from confluent_kafka import KafkaException, TopicPartition

        c = self._client(f"{self.group}-stop")
        try:
            got = c.committed([TopicPartition(anchor[0], anchor[1])], timeout=timeout_s)
        except KafkaException:
            return False  # cannot tell: go on (a stop is a courtesy; the driver stops after the job)
        finally:
            c.close()
        return bool(got) and got[0].offset == 1 and got[0].metadata == "stop"

    def forget(self) -> None:
        """Delete both groups (a finished job's progress is kept in its own result)."""
        admin = clients.admin(self.conf)
        for future in admin.delete_consumer_groups([self.group, f"{self.group}-stop"], request_timeout=10).values():
            try:
                future.result(10)
            except Exception:  # noqa: BLE001 - a group never created, or already gone
                pass

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
