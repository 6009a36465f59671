"""Apply one Kafka partition's slice of a micro-batch: runs on Spark executors (mapInArrow) and,
identically, in the plain-consumer benchmark.

Why per partition: a key always lives in one partition, and so do the snapshot fences, so each
partition is applied on its own, in parallel, with no shuffle. Stores and the dead-letter producer
are cached per Python worker (Spark reuses workers), keyed by the config (worker_context.py).
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

import orjson
import pyarrow as pa

from connectors.envelope import fence_key
from derived.change import Version
from pipelines.apply.batch import SPARK_TASK, ApplyOptions, apply_records, rows_from_arrow
from pipelines.apply.stats import BatchStats, add_stats
from pipelines.spark.schemas import ddl
from pipelines.state.rebuild_state import Targets
from pipelines.spark import worker_context
from pipelines.spark.worker_context import kafka_settings, worker_resources

STATS_SCHEMA = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("fence", pa.int64()), ("records", pa.int64()),
    ("tombstones", pa.int64()), ("dead_letters", pa.int64()), ("search_applied", pa.int64()),
    ("search_stale", pa.int64()), ("cache_applied", pa.int64()), ("cache_stale", pa.int64()),
    ("truncates", pa.int64()), ("snapshot_reads", pa.int64()), ("snapshot_last_lsn", pa.int64()),
    ("newest_source_ts_ms", pa.int64()), ("visible_ms", pa.list_(pa.int64())), ("truncate_cuts", pa.string()),
    ("toast_reread", pa.int64()), ("fresh_dead_letters", pa.int64()), ("letter_kinds", pa.string()),
])
STATS_DDL = ddl(STATS_SCHEMA)  # mapInArrow's declared output
CHUNK = 20_000


def release_kafka_clients() -> None:
    """Let go of the Kafka clients this process keeps for reuse (range readers, the per-batch admin
    client, the cached stores' dead-letter producers; collected, they close): for a process that
    outlives its broker (the test session, a benchmark), whose librdkafka clients would otherwise
    log their reconnect attempts until it exits."""
    import gc

    from connectors.kafka.clients import drop_kept_admins
    from connectors.kafka.ranges import close_readers

    close_readers()
    drop_kept_admins()
    worker_context.forget()
    gc.collect()


def apply_partition(batches: Iterable[pa.RecordBatch], stores, dlq, fences: dict[str, int], rebuild=None,
                    how: ApplyOptions | None = None) -> Iterator[dict[str, Any]]:
    """Apply records given as Arrow batches of the kafka source's columns."""
    yield from apply_rows(arrow_rows(batches), stores, dlq, fences, rebuild, how)


def arrow_rows(batches: Iterable[pa.RecordBatch]) -> Iterator[list[dict[str, Any]]]:
    for rb in batches:
        yield rows_from_arrow(pa.Table.from_batches([rb]))


def apply_rows(chunks: Iterable[list[dict[str, Any]]], stores, dlq, fences: dict[str, int], rebuild=None,
               how: ApplyOptions | None = None) -> Iterator[dict[str, Any]]:
    """Apply in chunks (versions make chunking safe); one stats row per topic-partition seen."""
    totals: dict[tuple[str, int], BatchStats] = {}
    pending: list[dict[str, Any]] = []

    def flush():
        by_tp: dict[tuple[str, int], list] = {}
        for r in pending:
            by_tp.setdefault((r["topic"], r["partition"]), []).append(r)
        for tp, rows in by_tp.items():
            stats = apply_records(rows, stores, fences, dlq, rebuild, how)
            add_stats(totals.setdefault(tp, BatchStats()), stats)
        pending.clear()

    for rows in chunks:
        pending.extend(rows)
        if len(pending) >= CHUNK:
            flush()
    if pending:
        flush()
    for (topic, partition), s in totals.items():
        row = {"topic": topic, "partition": partition, "fence": fences.get(fence_key(topic, partition), 0),
               **{k: getattr(s, k) for k in STATS_SCHEMA.names[3:]}}
        row["truncate_cuts"] = (orjson.dumps({t: list(v) for t, v in s.truncate_cuts.items()}).decode()
                                if s.truncate_cuts else None)
        row["letter_kinds"] = orjson.dumps(s.letter_kinds).decode() if s.letter_kinds else None
        yield row


def stats_of(row: dict[str, Any]) -> BatchStats:
    """A stats row (as the driver collects it) back into BatchStats."""
    fields = {k: row[k] for k in STATS_SCHEMA.names[3:]}
    fields["fresh_dead_letters"] = fields["fresh_dead_letters"] or 0
    fields["truncate_cuts"] = {t: Version(*v) for t, v in orjson.loads(row["truncate_cuts"] or "{}").items()}
    fields["letter_kinds"] = orjson.loads(row.get("letter_kinds") or "[]")
    return BatchStats(**fields)


def executor_fn(config_json: bytes, fences: dict[str, int], rebuild: Targets | None = None,
                how: ApplyOptions = SPARK_TASK) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function: closes over the config (secret refs, not values), the fences and
    a running rebuild's targets (written too, see apply_records)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return _apply_task(config_json, fences, rebuild, arrow_rows(batches), how)

    return run


def range_executor_fn(config_json: bytes, fences: dict[str, int], rebuild: Targets | None = None,
                      how: ApplyOptions = SPARK_TASK) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The same over a micro-batch of offset ranges (the source's `ranges` mode): each task reads
    its own partition's range from Kafka, so records never travel through the JVM."""

    def run(ranges: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return _apply_task(config_json, fences, rebuild, range_rows(ranges, kafka_settings(config_json)), how)

    return run


def _apply_task(config_json: bytes, fences: dict[str, int], rebuild: Targets | None,
                chunks: Iterable[list[dict[str, Any]]], how: ApplyOptions) -> Iterator[pa.RecordBatch]:
    """One task's records applied with this worker's stores; its stats rows as one Arrow batch.
    Truncates are left to the driver (see apply_records)."""
    stores, dlq = worker_resources(config_json)
    extra = worker_resources(config_json, rebuild) if rebuild else None
    rows = list(apply_rows(chunks, stores, dlq, dict(fences), extra, how))
    if rows:
        yield pa.RecordBatch.from_pylist(rows, schema=STATS_SCHEMA)


def range_rows(ranges: Iterable[pa.RecordBatch], conf: dict[str, Any]) -> Iterator[list[dict[str, Any]]]:
    """The records of each offset range (a row of the ranges' batches), read from Kafka, as row
    dicts a fetch at a time."""
    from connectors.kafka.ranges import range_records

    yield from range_records(conf, ((r["topic"], r["partition"], r["start"], r["end"])
                                    for rb in ranges for r in rb.to_pylist()))
