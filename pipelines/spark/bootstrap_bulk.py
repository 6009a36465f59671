"""The bootstrap's bulk: the initial snapshot applied as Debezium writes it, with the rebuild's
machinery (each Kafka partition read by its own task, folded, bulk-written), instead of through
the streaming query's micro-batches.

Rounds follow the topics: each reads every partition from where the last one reached to the end
offsets seen at its start, and applies the partition's leading snapshot reads (op=r). The first
record that is not one (Debezium streams the changes made meanwhile after the snapshot; a
tombstone; an undecodable record) stops that partition: the streaming query starts there, so
deletes and truncates take their usual path and nothing is applied twice but reads, whose versions
make a second write harmless. The bulk is done after a round that began once Connect had committed
the snapshot's offsets: Connect commits only what Kafka acknowledged, so that round's end offsets
hold every snapshot record (the argument of pipelines/ops/bootstrap.Watch.check_idle).

Memory stays bounded by a task's chunk (a snapshot read is the only record of its row, so folding
chunk by chunk loses nothing), not by the table's size.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Iterator

import orjson
import pyarrow as pa

from connectors.kafka.admin import matching_topics, topic_ids
from connectors.kafka.errors import TopicLost
from connectors.kafka.offsets import end_offsets
from connectors.kafka.ranges import KafkaRange, read_messages
from pipelines.apply.batch import apply_changes, as_documents
from pipelines.apply.snapshot_reads import SnapshotReads
from pipelines.apply.stats import BatchStats
from pipelines.config import Config, parse_config
from pipelines.spark.partition_apply import worker_resources
from pipelines.spark.schemas import ddl
from pipelines.state.bootstrap import SnapshotBulk, read_bulk, write_bulk
from pipelines.state.fences import FenceStore, fence_key
from pipelines.state.topic_ids import TopicIds
from pipelines.stopping import Interrupted, StopRequest

log = logging.getLogger("cdckit.bootstrap")

RANGE_SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("start", pa.int64()),
                          ("end", pa.int64())])
RESULT_SCHEMA = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("start", pa.int64()), ("reached", pa.int64()),
    ("stopped", pa.bool_()),
    ("reads", pa.int64()), ("fence", pa.int64()), ("search_applied", pa.int64()), ("cache_applied", pa.int64()),
    ("dead_letters", pa.int64()),
])
IDLE_WAIT_S = 0.3       # between rounds that found nothing new


def run(spark, config: Config, on_round: Callable[[SnapshotBulk], None], committed: Callable[[], bool],
        stop: StopRequest | None = None, check: Callable[[], None] = lambda: None) -> SnapshotBulk:
    """Rounds until the snapshot is applied (see the module's docstring); returns the final state,
    also recorded in the checkpoint. `committed()`: Connect has committed the snapshot's offsets;
    `check()` raises when the connector failed; a stop request ends it between rounds
    (Interrupted: a rerun resumes it)."""
    ckpt = config.spark.checkpoint_dir
    bulk = read_bulk(ckpt) or SnapshotBulk({}, [], {}, {})
    started = time.monotonic() - bulk.seconds
    client = config.kafka.client_config()
    fn = bulk_fn(orjson.dumps(config.model_dump(mode="json")))
    known_ids = TopicIds(ckpt)
    while not bulk.done:
        if stop is not None and stop.is_set():
            raise Interrupted(f"in the snapshot's bulk apply after {bulk.rounds} round(s)")
        check()
        last = committed()   # before the ends: then they hold every snapshot record
        topics = matching_topics(client, config.topic_pattern)
        ends = end_offsets(client, topics) if topics else {}
        ids = topic_ids(client, config.topic_pattern)
        recreated = known_ids.recreated(ids)
        if recreated:  # the offsets reached belong to the old topics
            raise TopicLost(f"change topics recreated during the snapshot's bulk: {', '.join(recreated[:5])}; "
                            "run `cdckit bootstrap` again (it re-snapshots)")
        known_ids.learn(ids)
        ranges = pending_ranges(bulk, ends)
        if ranges:
            pieces = split_ranges(ranges, spark.sparkContext.defaultParallelism)
            frame = spark.createDataFrame(spark.sparkContext.parallelize(pieces, len(pieces)), ddl(RANGE_SCHEMA))
            rows = frame.mapInArrow(fn, ddl(RESULT_SCHEMA)).toArrow().to_pylist()
            settle(bulk, config, rows)
        for t, parts in ends.items():   # partitions met empty still get a place to start from
            for p in parts:
                bulk.reached.setdefault(t, {}).setdefault(str(p), 0)
        bulk.rounds += 1
        bulk.done = last
        bulk.seconds = round(time.monotonic() - started, 1)
        if bulk.done:  # fences first: the streaming query's first batch starts from them
            FenceStore(ckpt).save(-1, bulk.fences)
        write_bulk(ckpt, bulk)
        log.debug("snapshot bulk round %d: %d range(s), %s reads so far, done=%s", bulk.rounds, len(ranges),
                  sum(bulk.reads.values()), bulk.done)
        on_round(bulk)
        if not ranges and not bulk.done:
            time.sleep(IDLE_WAIT_S)
    return bulk


def pending_ranges(bulk: SnapshotBulk, ends: dict[str, dict[str, int]]) -> list[tuple[str, int, int, int]]:
    """(topic, partition, start, end) of every partition not stopped with records past its reach."""
    out = []
    for t, parts in ends.items():
        for p, end in parts.items():
            start = int(bulk.reached.get(t, {}).get(str(p), 0))
            if fence_key(t, int(p)) not in bulk.stopped and int(end) > start:
                out.append((t, int(p), start, int(end)))
    return sorted(out, key=lambda r: r[2] - r[3])   # largest first: the longest task starts first


MIN_PIECE = 10_000      # records: below this a task's start costs more than the split saves


def split_ranges(ranges: list[tuple[str, int, int, int]], tasks: int) -> list[tuple[str, int, int, int]]:
    """The ranges cut into pieces of about an equal share of `tasks`, so every core works for the
    whole round (three partitions on two cores would otherwise take two waves). Safe for reads:
    a piece after a partition's first change may apply reads the streaming query then applies
    again at the same version (settle hands over at the lowest stop)."""
    total = sum(e - s for _, _, s, e in ranges)
    share = max(MIN_PIECE, -(-total // max(1, tasks)))
    out = []
    for t, p, s, e in ranges:
        while e - s > share + share // 2:
            out.append((t, p, s, s + share))
            s += share
        out.append((t, p, s, e))
    return sorted(out, key=lambda r: r[2] - r[3])


def settle(bulk: SnapshotBulk, config: Config, rows: list[dict[str, Any]]) -> None:
    """A round's task results into the bulk's state: a partition cut into pieces reaches its
    lowest stop if a piece stopped, else its end."""
    parts: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for row in rows:
        parts.setdefault((row["topic"], row["partition"]), []).append(row)
    for (topic, partition), pieces in parts.items():
        stops = [int(r["reached"]) for r in pieces if r["stopped"]]
        reached = min(stops) if stops else max(int(r["reached"]) for r in pieces)
        key = fence_key(topic, partition)
        bulk.reached.setdefault(topic, {})[str(partition)] = reached
        if stops and key not in bulk.stopped:
            bulk.stopped.append(key)
        # Pieces past the stop read what the streaming query reads again: their fences are its to find.
        fence = max((int(r["fence"]) for r in pieces if not stops or int(r["start"]) < reached), default=0)
        if fence:
            bulk.fences[key] = max(bulk.fences.get(key, 0), fence)
        table = config.table_for_topic(topic)
        reads = sum(int(r["reads"]) for r in pieces)
        if table is not None and reads:
            bulk.reads[table.name] = bulk.reads.get(table.name, 0) + reads


def bulk_fn(config_json: bytes) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function over a DataFrame of offset ranges, one per Spark partition."""

    def run_ranges(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for rb in batches:
            for r in rb.to_pylist():
                yield apply_range(config_json, r["topic"], r["partition"], r["start"], r["end"])

    return run_ranges


def apply_range(config_json: bytes, topic: str, partition: int, start: int, end: int) -> pa.RecordBatch:
    """The leading snapshot reads of [start, end) of one partition into the live stores, a chunk at
    a time; where it stopped (the first other record) or the end it reached."""
    config = parse_config(orjson.loads(config_json))
    stores, dlq = worker_resources(config_json)
    stats, letters = BatchStats(), []

    def write(fold) -> None:
        survivors, dead = fold.survivors(), list(fold.dead)
        as_documents(stores, survivors)
        apply_changes(stores, [], survivors, stats, dead, [])
        letters.append(dlq.write(dead) if dead else 0)

    reads = SnapshotReads({t.name: t.key for t in config.tables}, {config.topic_for(t): t.name for t in config.tables},
                          write, config.postgres.truncate_table)
    reader = read_messages(config.kafka.client_config(), KafkaRange(topic, partition, start, end))
    try:
        for msgs in reader:
            if not reads.add(topic, partition, msgs):
                break
    finally:
        reader.close()
    reads.finish()
    return pa.RecordBatch.from_pylist([{
        "topic": topic, "partition": partition, "start": start, "reached": end if reads.stopped_at is None else reads.stopped_at,
        "stopped": reads.stopped_at is not None, "reads": reads.reads,
        "fence": reads.fences.get(fence_key(topic, partition), 0), "search_applied": stats.search_applied,
        "cache_applied": stats.cache_applied, "dead_letters": sum(letters)}], schema=RESULT_SCHEMA)
