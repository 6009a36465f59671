"""A Spark 4 Python streaming data source over confluent-kafka, named `cdckit_kafka`: a thin
adapter over connectors.kafka (watermarks, offset ranges, the range readers).

It takes the built-in kafka source's options (subscribe, subscribePattern, startingOffsets,
maxOffsetsPerTrigger, kafka.*) and produces its columns. Offsets live only in Spark's checkpoint.
"""
from __future__ import annotations

import re
from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from connectors.kafka.offsets import Offsets, Watermarks, admit, next_end, starting_offsets, to_offsets
from connectors.kafka.ranges import ARROW_SCHEMA, RANGE_ARROW_SCHEMA, KafkaRange, pack_ranges, read_range
from pipelines.spark.schemas import struct_type

NAME = "cdckit_kafka"
# With the option `ranges` = "true" a micro-batch is one row per Kafka partition: the offset range
# itself. The job's apply task then reads its range (one Python process touches each record,
# instead of the reader's, the JVM's and the apply's). With `tasks` = N the ranges are packed into at
# most N Spark partitions (pack_ranges), one per core.


class RangePartition(InputPartition):
    """The ranges one Spark task reads: one (records), or several packed together (ranges mode)."""

    def __init__(self, ranges: list[KafkaRange]):
        self.ranges = ranges


def kafka_conf(options: dict[str, str]) -> dict[str, Any]:
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
        self.conf = kafka_conf(options)
        self.max_per_trigger = int(options["maxoffsetspertrigger"]) if options.get("maxoffsetspertrigger") else None
        self.poll_timeout_s = float(options.get("polltimeoutms", "120000")) / 1000
        self.ranges_only = options.get("ranges", "false") == "true"
        self.tasks = int(options.get("tasks", "0")) or None  # ranges mode: tasks per micro-batch
        if "subscribe" in options:
            topics: list[str] | None = [t.strip() for t in options["subscribe"].split(",") if t.strip()]
            pattern = None
        elif "subscribepattern" in options:
            topics, pattern = None, re.compile(options["subscribepattern"])
        else:
            raise ValueError("one of the options subscribe or subscribePattern is required")
        self.marks = Watermarks(self.conf, topics, pattern)
        self._available_now: Offsets | None = None

    # -- driver side --------------------------------------------------------------------------
    def initialOffset(self) -> Offsets:
        return starting_offsets(self.marks, self.options.get("startingoffsets", "earliest"))

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: read up to the ends as they are now, then stop."""
        self._available_now = to_offsets(self.marks.high(self.marks.partitions()))

    def latestOffset(self, start: Offsets | None = None, limit=None) -> Offsets:
        if self._available_now is not None:
            tps = sorted((t, int(p)) for t, parts in self._available_now.items() for p in parts)
            high = {(t, p): self._available_now[t][str(p)] for t, p in tps}
        else:
            high = self.marks.high(self.marks.partitions())
        begin, end = next_end(start, high)
        cap = self._cap(limit)
        if cap is not None:
            end = admit(begin, end, cap)
        return to_offsets(end)

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

    def partitions(self, start: Offsets, end: Offsets) -> list[RangePartition]:
        ranges = []
        for topic, parts in end.items():
            for p, e in parts.items():
                s = int(start.get(topic, {}).get(p, 0))
                if int(e) > s:
                    ranges.append(KafkaRange(topic, int(p), s, int(e)))
        if self.ranges_only:  # without `tasks`, a set per range
            return [RangePartition(s) for s in pack_ranges(ranges, self.tasks or len(ranges))]
        return [RangePartition([r]) for r in ranges]

    def commit(self, end: Offsets) -> None:
        """Offsets live in Spark's checkpoint; nothing to commit to Kafka."""

    def stop(self) -> None:
        self.marks.close()

    # -- executor side ------------------------------------------------------------------------
    def read(self, partition: RangePartition) -> Iterator[pa.RecordBatch]:
        if self.ranges_only:  # partitions() gave sets of ranges
            yield pa.RecordBatch.from_pylist([{"topic": r.topic, "partition": r.partition, "start": r.start,
                                               "end": r.end} for r in partition.ranges], schema=RANGE_ARROW_SCHEMA)
            return
        for r in partition.ranges:
            yield from read_range(self.conf, r, self.poll_timeout_s)


class KafkaDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        ranges = {k.lower(): v for k, v in self.options.items()}.get("ranges", "false") == "true"
        return struct_type(RANGE_ARROW_SCHEMA if ranges else ARROW_SCHEMA)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader({k.lower(): v for k, v in self.options.items()})
