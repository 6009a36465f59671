"""The rebuild's Spark side: a batch job folds each Kafka partition from its first offset to the
planned end and writes the survivors into the fresh generations; a streaming query (availableNow)
then catches the fresh generations up. Both run the functions here on executors (mapInArrow);
pipelines/rebuild/phases.py carries the phases out."""
from __future__ import annotations

import json
import logging
import shutil
import threading
import time
from typing import Any, Callable, Iterator

import orjson
import pyarrow as pa

from connectors.envelope import RecordError, decode, fence_key
from connectors.kafka.dead_letter_topic import DeadLetterWriter
from connectors.kafka.offsets import begin_offsets
from connectors.kafka.ranges import RANGE_ARROW_SCHEMA, KafkaRange, read_messages
from derived.change import Position, Version
from pipelines.apply import letter_kinds
from pipelines.apply.batch import ApplyOptions, apply_changes, apply_truncates, newest_cuts, prepare
from pipelines.apply.rebuild_fold import PartitionFold
from pipelines.apply.stats import BatchStats, add_stats
from pipelines.apply.stores import stores_from_config
from pipelines.config import Config
from pipelines.errors import CdckitError, PipelineFailed, from_spark_failure
from pipelines.spark.partition_apply import STATS_DDL, STATS_SCHEMA, apply_rows, arrow_rows, range_rows, stats_of
from pipelines.spark.stop_interruption import compact_interruptions
from pipelines.spark.worker_context import kafka_settings, worker_config, worker_resources
from pipelines.spark.schemas import ddl
from pipelines.state.checkpoint import RebuildWork
from pipelines.state.fences import FenceStore
from pipelines.state.rebuild_state import RebuildState, Targets, plan_partitions, progress_board, read_bulk, write_bulk
from pipelines.stopping import Interrupted, StopRequest

log = logging.getLogger("cdckit.rebuild")

BULK_SCHEMA = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("records", pa.int64()), ("tombstones", pa.int64()),
    ("survivors", pa.int64()), ("search_applied", pa.int64()), ("search_stale", pa.int64()),
    ("cache_applied", pa.int64()), ("cache_stale", pa.int64()), ("dead_letters", pa.int64()),
    ("unresolved_toast", pa.int64()), ("fence", pa.int64()),
    ("read_seconds", pa.float64()), ("fold_seconds", pa.float64()), ("apply_seconds", pa.float64()),
    ("letter_kinds", pa.string()),
])
BULK_DDL = ddl(BULK_SCHEMA)
RANGES_DDL = ddl(RANGE_ARROW_SCHEMA)
APPLY_CHUNK = 5_000


def config_json(config: Config) -> bytes:
    """The config as executors get it (secret refs, not values)."""
    return orjson.dumps(config.model_dump(mode="json"))


# -- bulk -------------------------------------------------------------------------------------------
def bulk(spark, config: Config, plan, work: RebuildWork, on_progress: Callable[[dict[str, dict[str, Any]]], None],
         stop: StopRequest | None = None) -> dict[str, Any]:
    """Every partition of the plan folded and written, except those a previous run finished; the
    totals over all of them (this run's and earlier runs'). A stop request lets the running tasks
    finish and the others skip their partition; then Interrupted (a rerun does the rest).

    A partition is finished when its result row is in the work folder (bulk.json, written by the
    driver): a task that reported `done` but whose row never reached the driver (the job failed
    elsewhere, the driver died) is done again, idempotently, so no partition's totals or snapshot
    fence go missing. The tasks report their progress to a Kafka consumer group
    (state/rebuild_state.progress_group), where the driver reads it whichever hosts they run on; the
    driver's stop request goes the same way. The board is advisory: a broker that refuses it leaves
    the bars still, never the rebuild failed."""
    partitions = plan_partitions(plan.end)
    board = progress_board(config.kafka.client_config(), plan.rebuild_id)
    anchor = partitions[0] if partitions else ("", 0)
    finished = read_bulk(work)
    todo = [(t, int(p), int(plan.begin.get(t, {}).get(p, 0)), int(e)) for t, parts in plan.end.items()
            for p, e in parts.items() if f"{t}-{p}" not in finished and int(e) > int(plan.begin.get(t, {}).get(p, 0))]
    rows: list[dict[str, Any]] = []
    try:
        _advisory(lambda: board.request_stop(anchor, False), "stop request not cleared")
        for t, p, start, _ in todo:  # an earlier run's reports of these partitions are no longer true
            board.report(t, p, start, read=0, applied=0)
        if todo:
            # One Spark partition per Kafka partition: a key and its snapshot fence live in one.
            frame = spark.createDataFrame(spark.sparkContext.parallelize(todo, len(todo)), RANGES_DDL)
            ended = threading.Event()
            watcher = threading.Thread(target=_watch_progress, args=(board, partitions, anchor, on_progress, ended,
                                                                     stop), daemon=True)
            watcher.start()
            try:
                cuts = truncate_cuts(config, plan.begin, plan.end)
                rows = (frame.mapInArrow(bulk_fn(config_json(config), plan.targets, work.name, anchor, cuts), BULK_DDL)
                        .toArrow().to_pylist())
            finally:
                ended.set()
                watcher.join()
        previous = read_bulk(work)
        for row in rows:
            previous[f"{row['topic']}-{row['partition']}"] = row
        write_bulk(work, previous)  # before anything else can fail
        log_first_letters(config, rows)
        _advisory(lambda: on_progress(board.read(partitions, timeout_s=5)), "rebuild progress not read")
    finally:
        board.close()
    skipped = [f"{t}-{p}" for t, p, _, _ in todo if f"{t}-{p}" not in previous]
    if skipped:
        if stop is not None and stop.is_set():
            raise Interrupted(f"in the bulk replay with {len(skipped)} partition(s) left")
        raise CdckitError(f"rebuild bulk: no result for {', '.join(skipped[:5])}")
    totals: dict[str, Any] = {k: sum(r[k] for r in previous.values()) for k in
                              ("records", "tombstones", "survivors", "search_applied", "search_stale", "cache_applied",
                               "cache_stale", "dead_letters", "unresolved_toast")}
    for k in ("read_seconds", "fold_seconds", "apply_seconds"):  # summed over partitions (they run in parallel)
        totals[k] = round(sum(r.get(k, 0) for r in previous.values()), 1)
    totals["fences"] = {fence_key(r["topic"], r["partition"]): r["fence"] for r in previous.values() if r["fence"]}
    return totals


def log_first_letters(config: Config, rows: list[dict[str, Any]]) -> None:
    """A WARNING line per kind of dead letter the tasks met (pipelines/apply/letter_kinds.py)."""
    samples: list[dict[str, Any]] = []
    for row in rows:
        samples = letter_kinds.merge(samples, orjson.loads(row.get("letter_kinds") or "[]"), letter_kinds.REMEMBERED)
    for line in letter_kinds.FirstLetters().lines(samples, lambda t: getattr(config.table_for_topic(t), "name", None)):
        log.warning(line)


def _advisory(action: Callable[[], Any], what: str) -> bool:
    """Run a progress-board action; a broker that refuses or times out is logged, not raised."""
    try:
        action()
        return True
    except Exception as exc:  # noqa: BLE001 - KafkaException, a timeout, a refused group: all advisory
        log.warning("%s: %s", what, exc)
        return False


def _watch_progress(board, partitions, anchor, on_progress, ended: threading.Event, stop: StopRequest | None) -> None:
    asked = False
    while not ended.wait(0.5):
        if stop is not None and stop.is_set() and not asked:
            asked = _advisory(lambda: board.request_stop(anchor), "stop request not sent (tried again)")
        try:
            on_progress(board.read(partitions, timeout_s=5))
        except Exception as exc:  # noqa: BLE001 - the bars stand still; the bulk goes on
            log.debug("rebuild progress not read: %s", exc)


def truncate_cuts(config: Config, begin: dict[str, dict[str, int]], end: dict[str, dict[str, int]]
                  ) -> dict[str, Version]:
    """The newest truncate per table within the plan's ranges, read from the marker topic before
    the bulk: a truncate's marker sits in one partition of its own topic, while the rows it removes
    are in every partition of the table's; each partition's fold starts from these cuts."""
    topic = config.truncate_topic
    truncates = []
    for p, last in end.get(topic, {}).items():
        first = int(begin.get(topic, {}).get(p, 0))
        for msgs in read_messages(config.kafka.client_config(), KafkaRange(topic, int(p), first, int(last))):
            for m in msgs:
                try:
                    out = decode(m.key(), m.value(), Position(topic, int(p), m.offset()),
                                 truncate_table=config.postgres.truncate_table)
                except RecordError:
                    continue  # not a marker the bulk can use; the live pipeline dead-lettered it
                if out is not None and getattr(out, "op", None) == "truncate":
                    truncates.append(out)
    return newest_cuts(truncates)


def bulk_fn(config_json: bytes, targets: Targets, rebuild_id: str, anchor: tuple[str, int],
            cuts: dict[str, Version] | None = None, boards: Callable[[bytes, str], Any] | None = None
            ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function over a DataFrame of offset ranges, one Kafka partition per Spark
    partition: each task reads its range itself (no second trip of every record through the JVM),
    folds it (from the truncate cuts read before, see truncate_cuts) and writes the survivors.
    `boards(config_json, rebuild_id)`: where tasks report (default: the rebuild's Kafka group)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        board = (boards or _kafka_board)(config_json, rebuild_id)
        try:
            for rb in batches:
                for r in rb.to_pylist():
                    if board.stop_requested(anchor):
                        continue  # asked to stop before this task began: a rerun does the partition
                    yield _bulk_range(config_json, targets, board, rebuild_id, r["topic"], r["partition"],
                                      r["start"], r["end"], cuts or {})
        finally:
            board.close()

    return run


def _kafka_board(config_json: bytes, rebuild_id: str):
    return progress_board(kafka_settings(config_json), rebuild_id)


def _bulk_range(config_json: bytes, targets: Targets, board, rebuild_id: str, topic: str, partition: int, start: int,
                end: int, cuts: dict[str, Version]) -> pa.RecordBatch:
    config = worker_config(config_json)
    fold, read_s, fold_s = _fold_range(config, board, topic, partition, start, end, cuts)
    t = time.perf_counter()
    survivors = fold.survivors()
    stats, dead = BatchStats(records=fold.records, tombstones=fold.tombstones), list(fold.dead)
    stores = worker_resources(config_json, targets)
    # TOAST values the compacted log no longer holds (pipelines/apply/toast_reread.py); the row filters.
    stats.toast_reread, stats.filtered_out = prepare(stores, survivors, every_upsert=True, dead=dead)
    for first in range(0, len(survivors), APPLY_CHUNK):
        apply_changes(stores, [], survivors[first:first + APPLY_CHUNK], stats, dead, [])
        board.report(topic, partition, end, read=fold.records, applied=min(first + APPLY_CHUNK, len(survivors)),
                     survivors=len(survivors))
    apply_s = time.perf_counter() - t
    for letter in dead:
        letter.extra["rebuild"] = rebuild_id
    written = DeadLetterWriter(config.kafka.client_config(), config.dead_letter_topic,
                               config.dlq.include_values).write(dead) if dead else 0
    board.report(topic, partition, end, read=fold.records, applied=len(survivors), survivors=len(survivors), done=True)
    return pa.RecordBatch.from_pylist([{
        "topic": topic, "partition": partition, "records": fold.records, "tombstones": fold.tombstones,
        "survivors": len(survivors), "search_applied": stats.search_applied, "search_stale": stats.search_stale,
        "cache_applied": stats.cache_applied, "cache_stale": stats.cache_stale, "dead_letters": written,
        "unresolved_toast": sum(1 for c in survivors if c.unavailable),
        "fence": fold.fences.get(fence_key(topic, partition), 0), "read_seconds": round(read_s, 2),
        "fold_seconds": round(fold_s, 2), "apply_seconds": round(apply_s, 2),
        "letter_kinds": orjson.dumps(letter_kinds.sample(dead)).decode() if dead else None}], schema=BULK_SCHEMA)


def _fold_range(config: Config, board, topic: str, partition: int, start: int, end: int,
                cuts: dict[str, Version]) -> tuple[PartitionFold, float, float]:
    """(fold, seconds reading, seconds folding) of [start, end) of one partition."""
    fold = PartitionFold({t.name: t.key for t in config.tables}, {config.topic_for(t): t.name for t in config.tables},
                         truncated=dict(cuts), truncate_table=config.postgres.truncate_table)
    started, fold_s, reported = time.perf_counter(), 0.0, 0
    for msgs in read_messages(config.kafka.client_config(), KafkaRange(topic, partition, start, end)):
        t = time.perf_counter()
        fold.add_messages(topic, partition, msgs)
        fold_s += time.perf_counter() - t
        if fold.records - reported >= 20_000:
            reported = fold.records
            board.report(topic, partition, msgs[-1].offset() + 1 if msgs else start, read=fold.records, applied=0,
                         survivors=len(fold.raw) + len(fold.latest))
    return fold, time.perf_counter() - started - fold_s, fold_s


# -- catch-up ---------------------------------------------------------------------------------------
def catchup(spark, config: Config, plan, work: RebuildWork, bulk_fences: dict[str, int],
            stop: StopRequest | None = None) -> dict[str, Any]:
    """Structured Streaming from the bulk's end to the log's end now (availableNow), into the fresh
    generations only, with the fences the bulk ended with. A stop request ends it after the
    current batch (Interrupted; its checkpoint resumes it)."""
    totals = _fresh_totals()
    if not plan.topics:
        return totals
    fences = FenceStore(work.root)
    if not fences.path.exists():
        fences.save(-1, bulk_fences)
    config_bytes = config_json(config)
    cuts = truncate_cuts(config, plan.begin, plan.end)  # what the bulk started from: older changes stay out

    idle = threading.Event()
    idle.set()

    def write(df, batch_id: int) -> None:
        idle.clear()
        try:
            state = fences.before(batch_id)
            out = (df.mapInArrow(catchup_fn(config_bytes, plan.targets, state, cuts), STATS_DDL)
                   .toArrow().to_pylist())
            for row in out:
                key = fence_key(row["topic"], row["partition"])
                state[key] = max(state.get(key, 0), row["fence"])
            _settle_fresh(config, plan.targets, out, totals)
            fences.save(batch_id, state)
        finally:
            idle.set()

    reader = (spark.readStream.format("cdckit_kafka").option("subscribe", ",".join(replayed_topics(config, plan.tables)))
              .option("startingOffsets", json.dumps(plan.end)))
    for key, value in config.kafka.client_config().items():
        reader = reader.option(f"kafka.{key}", value)
    query = (reader.load().writeStream.foreachBatch(compact_interruptions(write)).trigger(availableNow=True)
             .option("checkpointLocation", str(work.catchup)).queryName(f"cdckit-rebuild-{plan.rebuild_id}")
             .start())
    while query.isActive:
        if stop is not None and stop.is_set():
            idle.wait(60)
            query.stop()
            raise Interrupted("in the catch-up (its checkpoint resumes it)")
        try:
            query.awaitTermination(1)
        except Exception:  # noqa: BLE001 - the query failed: read below
            break
    if query.exception():
        text = str(query.exception())
        error = PipelineFailed(f"rebuild catch-up failed: {from_spark_failure(text)}")
        error.trace = text
        raise error
    return totals


def replayed_topics(config: Config, tables: list[str]) -> list[str]:
    """The topics a rebuild of `tables` replays, created or not (a partition or topic that is new
    since the plan, e.g. the truncate markers' after a first TRUNCATE, is read from its start)."""
    return [config.topic_for(t) for t in config.tables if t.name in tables] + [config.truncate_topic]


def reset_catchup(work: RebuildWork) -> None:
    """A catch-up replays from the plan's end again (its checkpoint and fences forgotten)."""
    shutil.rmtree(work.catchup, ignore_errors=True)
    FenceStore(work.root).path.unlink(missing_ok=True)


class MarkedLetters:
    """The catch-up's dead-letter sink: only store rejections, marked as the fresh generation's.
    Records that fail to decode were dead-lettered when the live pipeline first met them; they
    are counted all the same (the count is the records the fresh generation lacks, which the
    rebuild judges before its switch)."""

    def __init__(self, writer) -> None:
        self.writer = writer

    def write(self, letters) -> int:
        letters = list(letters)
        rejected = [d for d in letters if d.stage == "apply"]
        for letter in rejected:
            letter.extra["generation"] = "rebuild"
        if rejected:
            self.writer.write(rejected)
        return len(letters)


def catchup_fn(config_json: bytes, targets: Targets, fences: dict[str, int], cuts: dict[str, Version]
               ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The catch-up query's mapInArrow function over record batches."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from _apply_fresh(config_json, targets, fences, cuts, arrow_rows(batches))

    return run


def stretch_fn(config_json: bytes, targets: Targets, fences: dict[str, int], cuts: dict[str, Version]
               ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The live pipeline's catch-up over a DataFrame of offset ranges: each task reads its own."""

    def run(ranges: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        conf = kafka_settings(config_json)
        yield from _apply_fresh(config_json, targets, fences, cuts, range_rows(ranges, conf))

    return run


def _apply_fresh(config_json: bytes, targets: Targets, fences: dict[str, int], cuts: dict[str, Version],
                 chunks) -> Iterator[pa.RecordBatch]:
    # Tombstones too: the cleaner may have removed op=d records of the stretch, and the live
    # pipeline applied those deletes before it began writing the fresh generation. One writer
    # replays the stretch and then writes every batch, in order (see LiveDuty).
    how = ApplyOptions(defer_truncates=True, known_cuts=cuts, fresh_generation=True)
    # Rejections are the fresh generation's own (its mappings may differ from the live one's).
    config = worker_config(config_json)
    dlq = MarkedLetters(DeadLetterWriter(config.kafka.client_config(), config.dead_letter_topic,
                                         config.dlq.include_values))
    rows = list(apply_rows(chunks, worker_resources(config_json, targets), dlq, dict(fences), how=how))
    if rows:
        yield pa.RecordBatch.from_pylist(rows, schema=STATS_SCHEMA)


# -- the live pipeline's catch-up -------------------------------------------------------------------
def catch_up_stretch(spark, config: Config, state: RebuildState, end: dict[str, dict[str, int]]) -> dict[str, Any]:
    """[plan end, `end`) of every planned partition replayed into the fresh generations by the live
    pipeline, one task per partition, then the stretch's truncates (after every task's writes)."""
    plan = state.plan
    planned = plan.get("end") or {}
    topics = [t for t in replayed_topics(config, plan.get("tables") or []) if t in end]
    new = [t for t in topics if set(end[t]) - set(planned.get(t) or {})]
    low = begin_offsets(config.kafka.client_config(), new) if new else {}
    ranges = []
    for topic in topics:
        for p, last in end[topic].items():
            first = int((planned.get(topic) or {}).get(p, (low.get(topic) or {}).get(p, 0)))
            if int(last) > first:
                ranges.append((topic, int(p), first, int(last)))
    totals = _fresh_totals()
    if not ranges:
        return totals
    cuts = truncate_cuts(config, plan.get("begin") or {}, plan["end"])
    fences = dict((state.summary.get("bulk") or {}).get("fences") or {})
    frame = spark.createDataFrame(spark.sparkContext.parallelize(ranges, len(ranges)), RANGES_DDL)
    out = (frame.mapInArrow(stretch_fn(config_json(config), state.targets, fences, cuts), STATS_DDL)
           .toArrow().to_pylist())
    _settle_fresh(config, state.targets, out, totals)
    return totals


def _fresh_totals() -> dict[str, int]:
    return {"records": 0, "search_applied": 0, "search_stale": 0, "cache_applied": 0, "cache_stale": 0,
            "dead_letters": 0}


def _settle_fresh(config: Config, targets: Targets, out: list[dict[str, Any]], totals: dict[str, int]) -> None:
    """A replay step's task rows summed into `totals`, then its truncates applied to the fresh
    generations: after every task's writes (see apply_records)."""
    batch = BatchStats()
    for row in out:
        for k in totals:
            totals[k] += row[k]
        add_stats(batch, stats_of(row))
    if batch.truncate_cuts:
        apply_truncates(stores_from_config(config, targets), batch.truncate_cuts)
