"""A Spark 4 Python streaming data source over confluent-kafka, named `cdckit_kafka`.

It takes the built-in kafka source's options (subscribe, subscribePattern, startingOffsets,
maxOffsetsPerTrigger, kafka.*) and produces its columns. Offsets live only in Spark's checkpoint.
End offsets are read from the high watermark of a Fetch response: Tansu answers ListOffsets(latest)
wrongly. Compaction leaves gaps in offsets: a range is read until the next offset reaches its end.
"""
from __future__ import annotations

import json
import re
import time
from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import (BinaryType, IntegerType, LongType, StringType, StructField, StructType,
                               TimestampType)

NAME = "cdckit_kafka"
SCHEMA = StructType([
    StructField("key", BinaryType()), StructField("value", BinaryType()),
    StructField("topic", StringType()), StructField("partition", IntegerType()),
    StructField("offset", LongType()), StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
])
ARROW_SCHEMA = pa.schema([
    ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
    ("offset", pa.int64()), ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
])
# With the option `ranges` = "true" a micro-batch is one row per Kafka partition: the offset range
# itself. The job's apply task then reads its range (one Python process touches each record,
# instead of the reader's, the JVM's and the apply's). With `tasks` = N the ranges are packed into at
# most N Spark partitions (pack_ranges), one per core.
RANGE_SCHEMA = StructType([
    StructField("topic", StringType()), StructField("partition", IntegerType()),
    StructField("start", LongType()), StructField("end", LongType()),
])
RANGE_ARROW_SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("start", pa.int64()),
                                ("end", pa.int64())])
Offsets = dict[str, dict[str, int]]  # topic -> partition (as str, JSON keys) -> next offset


class KafkaRange(InputPartition):
    def __init__(self, topic: str, partition: int, start: int, end: int):
        self.topic, self.partition, self.start, self.end = topic, partition, start, end


class KafkaRangeSet(InputPartition):
    """Several ranges read by one Spark task (ranges mode): see pack_ranges."""

    def __init__(self, ranges: list[KafkaRange]):
        self.ranges = ranges


def pack_ranges(ranges: list[KafkaRange], tasks: int) -> list[KafkaRangeSet]:
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
    return [KafkaRangeSet(s) for s in sets if s]


def _kafka_conf(options: dict[str, str]) -> dict[str, Any]:
    conf = {k[len("kafka."):]: v for k, v in options.items() if k.startswith("kafka.")}
    if "bootstrap.servers" not in conf:
        raise ValueError("option kafka.bootstrap.servers is required")
    return conf


try:
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - pyspark without admission control
    SupportsTriggerAvailableNow = object  # type: ignore[misc,assignment]


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str]):
        self.options = options
        self.conf = _kafka_conf(options)
        self.max_per_trigger = int(options["maxoffsetspertrigger"]) if options.get("maxoffsetspertrigger") else None
        self.poll_timeout_s = float(options.get("polltimeoutms", "120000")) / 1000
        self.ranges_only = options.get("ranges", "false") == "true"
        self.tasks = int(options.get("tasks", "0")) or None  # ranges mode: tasks per micro-batch
        if "subscribe" in options:
            self.topics: list[str] | None = [t.strip() for t in options["subscribe"].split(",") if t.strip()]
            self.pattern = None
        elif "subscribepattern" in options:
            self.topics, self.pattern = None, re.compile(options["subscribepattern"])
        else:
            raise ValueError("one of the options subscribe or subscribePattern is required")
        self._consumer = None
        self._available_now: Offsets | None = None

    # -- driver side --------------------------------------------------------------------------
    def _meta_consumer(self):
        from confluent_kafka import Consumer

        if self._consumer is None:
            # fetch.wait.max.ms: a fetch at the log's end answers the high watermark; the broker
            # would otherwise hold it up to 500 ms waiting for data, on every micro-batch.
            self._consumer = Consumer({**self.conf, "group.id": "cdckit-source-driver", "enable.auto.commit": False,
                                       "enable.partition.eof": True, "auto.offset.reset": "latest",
                                       "fetch.wait.max.ms": 10, "log_level": 3})
        return self._consumer

    def _partitions(self) -> list[tuple[str, int]]:
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

    def _high_watermarks(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """High watermarks from Fetch responses (fetch near the end, wait for partition EOF)."""
        from confluent_kafka import OFFSET_END, KafkaError, TopicPartition

        if not tps:
            return {}
        c = self._meta_consumer()
        c.assign([TopicPartition(t, p, OFFSET_END) for t, p in tps])
        waiting = set(tps)
        deadline = time.monotonic() + 30
        while waiting and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None:
                continue
            if msg.error() is None or msg.error().code() == KafkaError._PARTITION_EOF:
                waiting.discard((msg.topic(), msg.partition()))
        if waiting:
            raise NoFetchResponse(sorted(waiting))
        out = {}
        for t, p in tps:
            _, high = c.get_watermark_offsets(TopicPartition(t, p), cached=True)
            out[(t, p)] = high
        c.unassign()
        return out

    def _low_watermarks(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        from confluent_kafka import TopicPartition

        c = self._meta_consumer()
        return {(t, p): c.get_watermark_offsets(TopicPartition(t, p), timeout=10)[0] for t, p in tps}

    def initialOffset(self) -> Offsets:
        tps = self._partitions()
        starting = self.options.get("startingoffsets", "earliest")
        if starting == "earliest":
            marks = self._low_watermarks(tps)
        elif starting == "latest":
            marks = self._high_watermarks(tps)
        else:
            given = json.loads(starting)
            marks = {}
            low = self._low_watermarks(tps)
            for t, p in tps:
                o = int(given.get(t, {}).get(str(p), -2))
                marks[(t, p)] = low[(t, p)] if o == -2 else o
        return _to_offsets(marks)

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: read up to the ends as they are now, then stop."""
        self._available_now = _to_offsets(self._high_watermarks(self._partitions()))

    def latestOffset(self, start: Offsets | None = None, limit=None) -> Offsets:
        if self._available_now is not None:
            tps = sorted((t, int(p)) for t, parts in self._available_now.items() for p in parts)
            high = {(t, p): self._available_now[t][str(p)] for t, p in tps}
        else:
            tps = self._partitions()
            high = self._high_watermarks(tps)
        start = start or {}
        begin = {tp: int(start.get(tp[0], {}).get(str(tp[1]), 0)) for tp in tps}
        _check_not_lost(start, begin, high)
        end = {tp: max(high[tp], begin[tp]) for tp in tps}
        cap = self._cap(limit)
        if cap is not None:
            end = _admit(begin, end, cap)
        return _to_offsets(end)

    def _cap(self, limit) -> int | None:
        try:
            from pyspark.sql.streaming.datasource import ReadMaxRows
        except ImportError:  # pragma: no cover - older pyspark
            return self.max_per_trigger
        if isinstance(limit, ReadMaxRows):
            return limit.max_rows
        return None if limit is not None else self.max_per_trigger

    def getDefaultReadLimit(self):
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

        return ReadMaxRows(self.max_per_trigger) if self.max_per_trigger else ReadAllAvailable()

    def partitions(self, start: Offsets, end: Offsets) -> list[KafkaRange] | list[KafkaRangeSet]:
        ranges = []
        for topic, parts in end.items():
            for p, e in parts.items():
                s = int(start.get(topic, {}).get(p, 0))
                if int(e) > s:
                    ranges.append(KafkaRange(topic, int(p), s, int(e)))
        if self.ranges_only:  # without `tasks`, a set per range
            return pack_ranges(ranges, self.tasks or len(ranges))
        return ranges

    def commit(self, end: Offsets) -> None:
        """Offsets live in Spark's checkpoint; nothing to commit to Kafka."""

    def stop(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    # -- executor side ------------------------------------------------------------------------
    def read(self, partition: KafkaRange | KafkaRangeSet) -> Iterator[pa.RecordBatch]:
        if self.ranges_only:  # partitions() gave sets of ranges
            yield pa.RecordBatch.from_pylist([{"topic": r.topic, "partition": r.partition, "start": r.start,
                                               "end": r.end} for r in partition.ranges], schema=RANGE_ARROW_SCHEMA)
            return
        yield from read_range(self.conf, partition, self.poll_timeout_s)


def end_offsets(kafka_conf: dict[str, Any], topics: list[str]) -> Offsets:
    """End offsets (high watermarks from Fetch responses) of these topics, from the driver."""
    reader = KafkaStreamReader({"subscribe": ",".join(topics), **{f"kafka.{k}": v for k, v in kafka_conf.items()}})
    try:
        return reader.latestOffset({}, None)
    finally:
        reader.stop()


def begin_offsets(kafka_conf: dict[str, Any], topics: list[str]) -> Offsets:
    """Earliest offsets still in the log (a compacted or retention-trimmed log may not start at 0)."""
    reader = KafkaStreamReader({"subscribe": ",".join(topics), **{f"kafka.{k}": v for k, v in kafka_conf.items()}})
    try:
        return _to_offsets(reader._low_watermarks(reader._partitions()))
    finally:
        reader.stop()


def read_range(conf: dict[str, Any], r: KafkaRange, poll_timeout_s: float = 120,
               chunk: int = 20_000) -> Iterator[pa.RecordBatch]:
    """Records of [start, end) of one partition as Arrow batches of the source's schema."""
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


STALE_WATERMARK_S = 2.0


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
                    raise RuntimeError(f"{where}: the log ends at {high}, before the range end {r.end} "
                                       f"(the topic was recreated or the broker lost its data: recover with `cdckit bootstrap`)")
                if stalled > STALE_WATERMARK_S and not _partition_exists(c, r):
                    raise RuntimeError(f"{where}: the topic or partition no longer exists (it was deleted or the "
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
                            raise RuntimeError(f"{where}: the log ends at {m.offset()}, before the range end "
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


def _reader(conf: dict[str, Any]):
    """A consumer kept per Python worker across micro-batches: creating one and connecting costs
    more than a small batch's whole read."""
    from confluent_kafka import Consumer

    key = json.dumps(conf, sort_keys=True, default=str)
    c = _readers.pop(key, None)
    if c is None:
        # fetch.wait.max.ms: a fetch left in flight at a range's log end would otherwise be held by
        # the broker up to 500 ms, and the next range's fetch (next batch, or the same task) waits behind it.
        c = Consumer({**conf, "group.id": "cdckit-source-reader", "enable.auto.commit": False,
                      "auto.offset.reset": "error", "enable.partition.eof": True, "fetch.max.bytes": 52428800,
                      "fetch.wait.max.ms": 10, "log_level": 3})
    return c


def _release(conf: dict[str, Any], c, healthy: bool) -> None:
    key = json.dumps(conf, sort_keys=True, default=str)
    if healthy and key not in _readers:
        c.unassign()
        _readers[key] = c
    else:
        c.close()


def close_readers() -> None:
    """Close this process's kept range readers (a process that outlives its broker, e.g. a
    benchmark, would otherwise log their reconnect attempts)."""
    while _readers:
        _readers.popitem()[1].close()


def _batch(r: KafkaRange, cols: dict[str, list]) -> pa.RecordBatch:
    n = len(cols["offset"])
    cols["topic"], cols["partition"] = [r.topic] * n, [r.partition] * n
    arrays = [pa.array(cols[f.name], type=f.type) if f.name != "timestamp"
              else pa.array(cols["timestamp"], type=pa.int64()).cast(f.type) for f in ARROW_SCHEMA]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


class KafkaUnavailable(RuntimeError):
    """The broker does not answer (restarting, unreachable): `cdckit run` retries after a pause."""


class NoFetchResponse(KafkaUnavailable):
    def __init__(self, tps: list[tuple[str, int]]):
        self.tps = tps
        super().__init__(f"no fetch response for {tps} within 30 s: the broker is unreachable, or it lost these "
                         "partitions (after a broker restart that lost its data, recover with `cdckit bootstrap`)")


class TopicLost(RuntimeError):
    """The log is behind the position already read: the topic was recreated or the broker lost it."""


def _check_not_lost(start: Offsets, begin: dict[tuple[str, int], int], high: dict[tuple[str, int], int]) -> None:
    gone = [f"{t} (gone)" for t, parts in start.items()
            if any(int(o) > 0 for o in parts.values()) and not any(tp[0] == t for tp in high)]
    gone += [f"{t}[{p}] ends at {high[(t, p)]}, below {begin[(t, p)]}" for t, p in begin if high[(t, p)] < begin[(t, p)]]
    if gone:
        raise TopicLost(f"change topics behind the pipeline's position: {', '.join(gone[:5])}. The broker lost its "
                        "data or a topic was recreated; recover with `cdckit bootstrap` (it re-snapshots)")


def _to_offsets(marks: dict[tuple[str, int], int]) -> Offsets:
    out: Offsets = {}
    for (t, p), o in sorted(marks.items()):
        out.setdefault(t, {})[str(p)] = int(o)
    return out


def _admit(begin: dict, end: dict, cap: int) -> dict:
    """Spread at most `cap` offsets over partitions, in proportion to what each has waiting."""
    waiting = {tp: end[tp] - begin[tp] for tp in end}
    total = sum(waiting.values())
    if total <= cap:
        return end
    return {tp: begin[tp] + max(1 if waiting[tp] else 0, waiting[tp] * cap // total) for tp in end}


class KafkaDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        ranges = {k.lower(): v for k, v in self.options.items()}.get("ranges", "false") == "true"
        return RANGE_SCHEMA if ranges else SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader({k.lower(): v for k, v in self.options.items()})
