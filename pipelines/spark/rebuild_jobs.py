"""The rebuild's Spark side: a batch job folds each Kafka partition from its first offset to the
planned end and writes the survivors into the fresh generations; a streaming query (availableNow)
then catches the fresh generations up. Both run the functions here on executors (mapInArrow)."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Iterator

import orjson
import pyarrow as pa

from derived.change import Version
from pipelines.apply.batch import BatchStats, Targets, apply_changes
from pipelines.state.json_files import read_json, write_json
from pipelines.spark.schemas import ddl
from connectors.kafka.ranges import RANGE_ARROW_SCHEMA

BULK_SCHEMA = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("records", pa.int64()), ("tombstones", pa.int64()),
    ("survivors", pa.int64()), ("search_applied", pa.int64()), ("search_stale", pa.int64()),
    ("cache_applied", pa.int64()), ("cache_stale", pa.int64()), ("dead_letters", pa.int64()),
    ("unresolved_toast", pa.int64()), ("fence", pa.int64()),
    ("read_seconds", pa.float64()), ("fold_seconds", pa.float64()), ("apply_seconds", pa.float64()),
])
BULK_DDL = ddl(BULK_SCHEMA)
APPLY_CHUNK = 5_000


def progress_file(work: Path, topic: str, partition: int) -> Path:
    return work / "progress" / f"{topic}-{partition}.json"


def _report(path: Path, **fields: Any) -> None:
    # Local mode shares the file system with the driver, which draws the progress bars from these.
    write_json(path, fields)


def read_progress(work: Path) -> dict[str, dict[str, Any]]:
    found = {p.stem: read_json(p) for p in (work / "progress").glob("*.json")}
    return {name: body for name, body in found.items() if body is not None}


RANGES_DDL = ddl(RANGE_ARROW_SCHEMA)


def bulk_fn(config_json: bytes, targets: Targets, work: str, cuts: dict[str, Version] | None = None
            ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function over a DataFrame of offset ranges, one Kafka partition per Spark
    partition: each task reads its range itself (no second trip of every record through the JVM),
    folds it (from the truncate cuts read before, see rebuild.truncate_cuts) and writes the survivors."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for rb in batches:
            for r in rb.to_pylist():
                yield _bulk_range(config_json, targets, work, r["topic"], r["partition"], r["start"], r["end"],
                                  cuts or {})

    return run


def _bulk_range(config_json: bytes, targets: Targets, work: str, topic: str, partition: int, start: int,
                end: int, cuts: dict[str, Version]) -> pa.RecordBatch:
    from pipelines.config import parse_config
    from connectors.kafka.dead_letter_topic import DeadLetterWriter
    from pipelines.spark.partition_apply import _resources

    config = parse_config(orjson.loads(config_json))
    progress = progress_file(Path(work), topic, partition)
    fold, read_s, fold_s = _fold_range(config, topic, partition, start, end, progress, cuts)
    t = time.perf_counter()
    survivors = fold.survivors()
    stats, dead = BatchStats(records=fold.records, tombstones=fold.tombstones), list(fold.dead)
    stores = _resources(config_json, targets)
    if stores.toast is not None:  # TOAST values the compacted log no longer holds (pipelines/apply/toast_reread.py)
        stores.toast.fill(survivors, every_upsert=True)
    for first in range(0, len(survivors), APPLY_CHUNK):
        apply_changes(stores, [], survivors[first:first + APPLY_CHUNK], stats, dead, [])
        _report(progress, read=fold.records, applied=first + APPLY_CHUNK, survivors=len(survivors))
    apply_s = time.perf_counter() - t
    for letter in dead:
        letter.extra["rebuild"] = Path(work).name
    written = DeadLetterWriter(config.kafka.client_config(), config.dead_letter_topic).write(dead) if dead else 0
    _report(progress, read=fold.records, applied=len(survivors), survivors=len(survivors), done=True)
    return pa.RecordBatch.from_pylist([{
        "topic": topic, "partition": partition, "records": fold.records, "tombstones": fold.tombstones,
        "survivors": len(survivors), "search_applied": stats.search_applied, "search_stale": stats.search_stale,
        "cache_applied": stats.cache_applied, "cache_stale": stats.cache_stale, "dead_letters": written,
        "unresolved_toast": sum(1 for c in survivors if c.unavailable),
        "fence": fold.fences.get(f"{topic}:{partition}", 0), "read_seconds": round(read_s, 2),
        "fold_seconds": round(fold_s, 2), "apply_seconds": round(apply_s, 2)}], schema=BULK_SCHEMA)


def _fold_range(config, topic: str, partition: int, start: int, end: int, progress: Path,
                cuts: dict[str, Version]):
    """(fold, seconds reading, seconds folding) of [start, end) of one partition."""
    from connectors.kafka.ranges import KafkaRange, read_messages
    from pipelines.apply.rebuild_fold import PartitionFold

    fold = PartitionFold({t.name: t.key for t in config.tables}, {config.topic_for(t): t.name for t in config.tables},
                         truncated=dict(cuts), truncate_table=config.postgres.truncate_table)
    started, fold_s, reported = time.perf_counter(), 0.0, 0
    for msgs in read_messages(config.kafka.client_config(), KafkaRange(topic, partition, start, end)):
        t = time.perf_counter()
        fold.add_messages(topic, partition, msgs)
        fold_s += time.perf_counter() - t
        if fold.records - reported >= 20_000:
            reported = fold.records
            _report(progress, read=fold.records, applied=0, survivors=len(fold.raw) + len(fold.latest))
    return fold, time.perf_counter() - started - fold_s, fold_s


class _MarkedLetters:
    """The catch-up's store rejections, marked as the fresh generation's. Records that fail to
    decode were dead-lettered when the live pipeline first met them."""

    def __init__(self, writer) -> None:
        self.writer = writer

    def write(self, letters) -> int:
        rejected = [d for d in letters if d.stage == "apply"]
        for letter in rejected:
            letter.extra["generation"] = "rebuild"
        return self.writer.write(rejected) if rejected else 0


def catchup_fn(config_json: bytes, targets: Targets, fences: dict[str, int], cuts: dict[str, Version]
               ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pipelines.apply.batch import ApplyOptions
        from pipelines.config import parse_config
        from connectors.kafka.dead_letter_topic import DeadLetterWriter
        from pipelines.spark.partition_apply import STATS_SCHEMA, _resources, apply_partition

        # Tombstones too: the cleaner may have removed op=d records of the catch-up's stretch, and the
        # live pipeline applied those deletes before it began writing the fresh generation. (Left:
        # a key deleted that way and created again after the catch-up's end, which the live job
        # wrote into the fresh generation before the catch-up reached the tombstone.)
        how = ApplyOptions(defer_truncates=True, known_cuts=cuts, fresh_generation=True)
        # Rejections are the fresh generation's own (its mappings may differ from the live one's).
        config = parse_config(orjson.loads(config_json))
        dlq = _MarkedLetters(DeadLetterWriter(config.kafka.client_config(), config.dead_letter_topic))
        rows = list(apply_partition(batches, _resources(config_json, targets), dlq, dict(fences), how=how))
        if rows:
            yield pa.RecordBatch.from_pylist(rows, schema=STATS_SCHEMA)

    return run
