"""`cdckit run`: one Structured Streaming query over every change topic, applying each micro-batch
to the search index and the cache. Spark schedules; pipelines/apply does the work."""
from __future__ import annotations

import json
import logging
import threading
import time
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterable

import orjson

from connectors.envelope import fence_key
from connectors.kafka.broker_errors import TopicLost
from connectors.kafka.clients import ensure_topic, topic_ids
from derived.sinks import markers as store_markers
from derived.sinks.store_errors import StoreUnavailable
from pipelines.apply.batch import ApplyOptions, apply_truncates
from pipelines.apply.letter_kinds import FirstLetters
from pipelines.apply.stats import BatchStats, add_stats
from pipelines.apply.stores import definitions, marker_definition, stores_from_config
from pipelines.config import Config, load_config
from pipelines.errors import CdckitError, from_spark_failure
from pipelines.spark.stop_interruption import compact_interruptions
from pipelines.streaming import restart_pause
from pipelines.streaming.batch_cadence import BatchCadence
from pipelines.streaming.visibility_publisher import VisibilityPublisher
from pipelines.stopping import StopRequest
from pipelines.spark.change_topics import topic_reader
from pipelines.spark.partition_apply import STATS_DDL, executor_fn, range_executor_fn, stats_of
from pipelines.spark.session import spark_session
from pipelines.state.fences import FenceStore
from pipelines.state.query_offsets import batch_committed, batch_offsets, committed_batch, committed_offsets
from pipelines.state import bootstrap_state
from pipelines.state import rebuild_state
from pipelines.state.status_file import Heartbeat, claim_status, write_status
from pipelines.state.topic_ids import TopicIds
from pipelines.state.truncate_cuts import TruncateCuts

log = logging.getLogger("cdckit.job")
STOP_GRACE_S = 600.0
COMMIT_WAIT_S = 30.0   # Spark records a batch ~50 ms after it returns; far longer on a stalled machine


def change_stream(spark, config: Config):
    """Every table topic of the prefix as a streaming DataFrame with the kafka source's columns.
    A pattern, not a list, so a table added later (`cdckit snapshot add`) needs no restart."""
    starting = bootstrap_state.handover(config.spark.checkpoint_dir)   # after a bulk bootstrap
    return topic_reader(spark, config, config.topic_pattern, ranges=True, starting=starting).load()


class LiveConfig:
    """The config a batch runs with: re-read when its file changes, so tables can be added while
    the job runs; an invalid edit is logged and the previous config kept."""

    def __init__(self, config: Config, path: Path | None = None):
        self.config, self.path = config, path
        # Unknown: the file may have changed since `config` was read from it, so the first batch re-reads it.
        self.mtime: float | None = None
        self._prepare()

    def _prepare(self) -> None:
        self.stores = stores_from_config(self.config)
        self.indexes_ensured = False
        self.json = orjson.dumps(self.config.model_dump(mode="json"))

    def check_stores(self, fresh: bool) -> None:
        """A fresh pipeline (no batch committed) marks its stores; later batches refuse to write
        stores whose marker vanished (they lost their data: see derived/sinks/markers.py) and never
        create their indices again (a rebuild does that). A table's first index is created here."""
        cfg, sinks = self.config, self.stores.by_name(self.config.sinks)
        try:
            if fresh:
                for sink in sinks.values():
                    sink.mark(cfg.topic_prefix, "pipeline", marker_definition(cfg))
                gone = []
            else:
                gone = [name for name, sink in sinks.items() if not sink.marked(cfg.topic_prefix)]
            if not self.indexes_ensured and not gone:
                self._create_indexes()
                self.indexes_ensured = True
        except Exception as exc:  # noqa: BLE001 - connection errors of either client: pause, then retry
            raise StoreUnavailable(f"a store did not answer before the batch: {type(exc).__name__}: {exc}") from exc
        if gone:
            raise StoreUnavailable(store_markers.lost_message(gone, {"search": cfg.search.url, "cache": cfg.redis.url}))

    def _create_indexes(self) -> None:
        """A first generation for each table without an index, defined from the config and the
        column types in the catalog (read only when an index is missing)."""
        s = self.stores
        missing = [name for name, table in s.search_tables.items() if not s.search.holds(table)]
        wanted = definitions(self.config, missing) if missing else {}
        for name in missing:
            s.search.prepare(replace(s.search_tables[name], definition=wanted.get(name)))
        # A bootstrap's bulk load cut short by a crash left its indexes' refreshes paused (its note).
        noted = bootstrap_state.refresh_paused(self.config.spark.checkpoint_dir)
        for name in noted:
            if name in s.search_tables and name not in missing:   # a missing index was just made anew
                s.search.end_load(s.search_tables[name])
                log.warning("index %s: refreshes paused by an interrupted snapshot load, restored",
                            s.search_tables[name].alias)
        if noted:
            bootstrap_state.clear_refresh_paused(self.config.spark.checkpoint_dir)

    def current(self) -> Config:
        if self.path is not None:
            try:
                mtime = self.path.stat().st_mtime
            except OSError:
                return self.config
            if mtime != self.mtime:
                self.mtime = mtime
                try:
                    fresh = load_config(self.path)
                    fresh.spark.checkpoint_dir = self.config.spark.checkpoint_dir
                    if fresh != self.config:
                        self.config = fresh
                        self._prepare()
                        log.warning("config reloaded: %d table(s)", len(fresh.tables))
                except CdckitError as exc:
                    log.error("config change ignored: %s", exc)
        return self.config


def batch_writer(config: Config, on_batch: Callable | None = None, config_path: Path | None = None, metrics=None,
                 gate: "BatchGate | None" = None, written: Callable[[], None] | None = None):
    """foreachBatch: every Kafka partition's slice is applied on an executor (mapInArrow), which
    reads the slice itself when the source gives offset ranges; the driver only gathers the
    per-partition stats and fences. `written()` after a batch that wrote the search indexes
    (the visibility publisher then makes that searchable)."""
    live = LiveConfig(config, config_path)
    ensure_topic(config.kafka.client_config(), config.dead_letter_topic)
    fences = FenceStore(config.spark.checkpoint_dir)

    # A bulk bootstrap (state/bootstrap_state.handover) marked the stores already: from here on, a marker
    # gone means lost data.
    fresh = (committed_offsets(config.spark.checkpoint_dir) is None
             and bootstrap_state.handover(config.spark.checkpoint_dir) is None)
    cuts = TruncateCuts(config.spark.checkpoint_dir)
    known_ids = TopicIds(config.spark.checkpoint_dir)
    schema = _schema_watch(live, config_path)
    first_letters = FirstLetters()

    cadence = batch_cadence(config)

    def write(df, batch_id: int) -> None:
        if gate is None:
            apply_batch(df, batch_id)
        else:
            gated_batch(gate, cadence, batch_id, lambda: apply_batch(df, batch_id))

    def apply_batch(df, batch_id: int) -> BatchStats:
        nonlocal fresh
        started = time.monotonic()
        before = live.config
        live.current()
        if live.config is not before:
            schema.config_edited(before, live.config)
        live.check_stores(fresh)
        fresh = False
        _check_schema(schema, live.config)
        ids = topic_ids(config.kafka.client_config(), config.topic_pattern)
        recreated = known_ids.recreated(ids)
        if recreated:
            raise TopicLost(f"change topics recreated since the pipeline read them: {', '.join(recreated[:5])}. "
                            "Their positions belong to the old topics; recover with `cdckit bootstrap`"
                            " (it re-snapshots)")
        known_ids.learn(ids)
        state = fences.before(batch_id)
        with ExitStack() as held:
            duty = _rebuild_duty(config.spark.checkpoint_dir, held)
            stats, out, stretch = _apply(df, batch_id, duty, state, live, cuts)
            if written is not None and (stats.search_applied or stats.truncate_cuts):
                written()
            fences.save(batch_id, state)
            seconds = time.monotonic() - started
            if duty is not None and duty.targets and stats.fresh_dead_letters and duty.state.catchup_epoch:
                # Before the status, which the rebuild's wait reads: its verdict counts these
                # refusals of the fresh generation too (pipelines/rebuild/switch_gate.py).
                rebuild_state.add_live_letters(config.spark.checkpoint_dir, duty.state.catchup_epoch,
                                               stats.fresh_dead_letters)
            write_status(config.spark.checkpoint_dir, batch_id, stats, seconds)
            if stretch is not None:  # after the status: the rebuild's wait for in-flight batches reads it
                rebuild_state.mark_live_caught_up(config.spark.checkpoint_dir, duty.state.catchup_epoch, batch_id,
                                                  stretch)
                log.info("rebuild %s: catch-up stretch of %d records replayed", duty.rebuild_id, stretch["records"])
        if metrics is not None:
            metrics.batch(stats, seconds, out, live.config)
        for line in first_letters.lines(stats.letter_kinds, lambda topic: _table_name(live.config, topic)):
            log.warning(line)
        log.info(batch_line(batch_id, stats, seconds, gate.lag if gate else None, live.config.sinks))
        if on_batch:
            on_batch(batch_id, stats, out)
        return stats

    def _apply(df, batch_id: int, duty, state: dict[str, int], live: LiveConfig, cuts: TruncateCuts):
        """The batch into the live stores, and into a running rebuild's fresh generations as `duty` says."""
        rebuild = duty.targets if duty else None
        stretch = None
        if duty and duty.catch_up:
            from pipelines.rebuild.spark_jobs import catch_up_stretch

            # [plan end, this batch's end) into the fresh generations; this batch's records are
            # then written to the live stores only: the stretch held them already.
            log.info("rebuild %s: replaying the fresh generations' catch-up stretch", duty.rebuild_id)
            stretch = catch_up_stretch(df.sparkSession, live.config, duty.state,
                                       batch_offsets(config.spark.checkpoint_dir, batch_id))
            rebuild = None
        apply_fn = range_executor_fn if "start" in df.columns else executor_fn  # ranges, or records (JVM source)
        how = ApplyOptions(defer_truncates=True, known_cuts=cuts.known)
        out = df.mapInArrow(apply_fn(live.json, state, rebuild, how), STATS_DDL).toArrow().to_pylist()
        stats = BatchStats()
        for row in out:
            key = fence_key(row["topic"], row["partition"])
            state[key] = max(state.get(key, 0), row["fence"])
            add_stats(stats, stats_of(row))
        if stats.truncate_cuts:  # after every task's writes: see apply_records
            if rebuild:
                apply_truncates(stores_from_config(live.config, rebuild), stats.truncate_cuts)
            apply_truncates(live.stores, stats.truncate_cuts)
            cuts.learn(stats.truncate_cuts)
        return stats, out, stretch

    return write


def gated_batch(gate: "BatchGate", cadence: BatchCadence | None, batch_id: int,
                apply: Callable[[], BatchStats]) -> None:
    """A batch applied with the gate marking it in flight; under load it then waits before it
    returns (batch_cadence.py): within the gate, so a stop waits for the batch and its wait, and
    cuts the wait short (gate.hurry)."""
    started = time.monotonic()
    gate.begin(batch_id)
    finished = None
    try:
        stats = apply()
        if cadence is not None:
            was = cadence.loaded
            wait = cadence.wait_after(stats.records, started, time.monotonic())
            if cadence.loaded != was:
                log.info("%s (%.0f records/s): batches start %s apart", "under load" if cadence.loaded
                         else "load gone", cadence.rate, f"{cadence.under_load_s:g} s" if cadence.loaded
                         else f"{cadence.trigger_s:g} s (the trigger's interval)")
            gate.hurry.wait(wait)
        finished = batch_id
    finally:
        gate.end(finished)


def batch_cadence(config: Config) -> BatchCadence | None:
    """The tables' batches spaced further apart under load (pipelines/streaming/batch_cadence.py);
    None when they never are."""
    spark = config.spark
    if spark.trigger == "available_now" or spark.trigger_under_load is None:
        return None
    under_load_s, trigger_s = spark.seconds(spark.trigger_under_load), spark.seconds(spark.trigger)
    return (BatchCadence(trigger_s, under_load_s, spark.load_rate, spark.max_offsets_per_trigger)
            if under_load_s > trigger_s else None)


def _table_name(config: Config, topic: str) -> str | None:
    table = config.table_for_topic(topic)
    return table.name if table is not None else None


def _schema_watch(live: LiveConfig, config_path: Path | None):
    from pipelines.schema.actions import JobSchemaActions
    from pipelines.schema.column_watch import SchemaWatch
    from pipelines.state.schema import SchemaState

    return SchemaWatch(SchemaState(live.config.spark.checkpoint_dir),
                       JobSchemaActions(lambda: live.config, lambda: live.stores, config_path))


def _check_schema(schema, config: Config) -> None:
    """The tables' columns against the last seen (a change acted on per on_schema_change). A
    SchemaChangeError (policy stop) fails the batch; the database not answering only skips a check."""
    from pipelines.errors import SchemaChangeError

    try:
        schema.check(config)
    except SchemaChangeError:
        raise
    except Exception as exc:  # noqa: BLE001 - Postgres or the search engine not answering: next batch
        if any(t.on_schema_change == "stop" for t in config.tables):
            # `stop` promises no batch of a new shape: unchecked, the batch waits (a restart's pause).
            raise StoreUnavailable(f"postgres: the schema check before the batch (a table under "
                                   f"on_schema_change: stop) did not read the catalog: {type(exc).__name__}: "
                                   f"{str(exc)[:200]}") from exc
        log.warning("schema check skipped: %s: %s", type(exc).__name__, str(exc)[:200])


def batch_line(batch_id: int, stats: BatchStats, seconds: float, lag: dict[str, int] | None,
               sinks: Iterable[str] = ("search", "cache")) -> str:
    """The one INFO line per batch: what it read and wrote per configured store (`sinks`), how far
    behind the topics' ends the pipeline was at its start, and how old the newest change it applied was."""
    parts = [f"batch {batch_id}: {stats.records:,} records"]
    if stats.snapshot_reads:
        parts.append(f"{stats.snapshot_reads:,} snapshot rows")
    if "search" in sinks:
        parts.append(f"search {stats.search_applied:,} applied/{stats.search_stale:,} stale")
    if "cache" in sinks:   # a store left out of `sinks` is not named at all
        parts.append(f"cache {stats.cache_applied:,} applied/{stats.cache_stale:,} stale")
    if stats.dead_letters:
        parts.append(f"{stats.dead_letters:,} DEAD LETTERS (`cdckit dlq list`)")
    if lag is not None:
        parts.append(f"lag {sum(lag.values()):,}")
    if stats.newest_source_ts_ms:
        parts.append(f"freshness {max(0.0, time.time() - stats.newest_source_ts_ms / 1000):.1f} s")
    parts.append(f"{seconds:.2f} s")
    return ", ".join(parts)


def _rebuild_duty(checkpoint_dir: Path, held: ExitStack) -> rebuild_state.LiveDuty | None:
    """What a running rebuild asks of this batch, with the fresh generation's writer lock held for
    the batch (see LiveDuty): while the rebuild replays its catch-up stretch itself, this waits."""
    duty = rebuild_state.live_duty(checkpoint_dir)
    if duty is None:
        return None
    waited = time.monotonic()
    held.enter_context(rebuild_state.writer_lock(checkpoint_dir))
    if time.monotonic() - waited > 1:
        log.warning("rebuild %s: waited %.0f s for its catch-up and switch", duty.rebuild_id,
                    time.monotonic() - waited)
    return rebuild_state.live_duty(checkpoint_dir)  # what holds now: it may have switched meanwhile


def start(spark, config: Config, on_batch=None, config_path: Path | None = None, metrics=None,
          gate: "BatchGate | None" = None, written: Callable[[], None] | None = None):
    """The tables' query, and the nested documents' beside it when the config has documents.
    `written()`: after a batch of either wrote the search indexes."""
    documents = start_documents(spark, config, written) if config.documents else None
    if documents is not None:
        _await_sources_started(documents.query)
    write = batch_writer(config, on_batch, config_path, metrics, gate, written)
    try:
        # Planning the source starts a Python worker too (the data source's schema), here, not in the query.
        writer = (change_stream(spark, config).writeStream.foreachBatch(compact_interruptions(write))
                  .option("checkpointLocation", str(config.spark.checkpoint_dir / "query")))
        if config.spark.trigger == "available_now":
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=config.spark.trigger)
        tables = writer.queryName("cdckit").start()
    except BaseException:
        if documents is not None:
            documents.stop()
        raise
    return tables if documents is None else Queries(tables, documents)


SOURCES_START_S = 60.0
_STARTING = ("Initializing StreamExecution", "Initializing sources")


def _await_sources_started(query, timeout_s: float = SOURCES_START_S) -> None:
    """Until the query's source has asked for its first offsets. Spark's runner of a Python streaming
    source adds its settings to the environment map every function of that source shares
    (PythonStreamingSourceRunner.init, pyspark 4.3): two queries starting at once added them from two
    threads, corrupting the map, and every task that carried it failed to deserialize
    (java.io.OptionalDataException, seen on a restart after kill -9). Once one source has added
    them, a later start only replaces their values."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and query.isActive:
        message = (query.status or {}).get("message", "")
        if message and message not in _STARTING and not message.startswith("Getting offsets"):
            return
        time.sleep(0.1)


def start_documents(spark, config: Config, written: Callable[[], None] | None = None):
    """The documents' specs resolved against the catalog (errors name the field), their indexes
    created, their query started."""
    from pipelines.documents import documents_query
    from pipelines.documents.document_specs import resolve_from_catalog
    resolved = resolve_from_catalog(config)
    documents_query.ensure_indexes(config, stores_from_config(config))
    return documents_query.LiveDocuments(spark, config, orjson.dumps(config.model_dump(mode="json")), resolved,
                                         written)


class Queries:
    """The tables' query and the documents' run and stop together: `run` follows the first, and a
    failure of either ends both (then both restart from their checkpoints)."""

    def __init__(self, tables, documents):
        self.tables, self.documents = tables, documents

    @property
    def isActive(self) -> bool:  # noqa: N802 - StreamingQuery's spelling
        if self.exception() is not None:
            return False
        return self.tables.isActive or self.documents.isActive  # available_now: until both are done

    @property
    def lastProgress(self):  # noqa: N802
        return self.tables.lastProgress

    def awaitTermination(self, timeout: float | None = None):  # noqa: N802
        return (self.tables if self.tables.isActive else self.documents).awaitTermination(timeout)

    def exception(self):
        return self.tables.exception() or self.documents.exception()

    def tend(self) -> None:
        """Between polls: the documents' query moves to a rebuild's state once it has switched."""
        self.documents.tend()

    def stop(self) -> None:
        try:
            self.documents.stop()
        finally:
            self.tables.stop()


def progress_lag(progress: dict | None) -> dict[str, int]:
    """Records between the last batch's end and the newest offsets the source saw, per topic."""
    if not progress or not progress.get("sources"):
        return {}
    src = progress["sources"][0]
    end, latest = src.get("endOffset"), src.get("latestOffset")
    end, latest = ((json.loads(x) if isinstance(x, str) else x) or {} for x in (end, latest))
    return {t: sum(max(0, int(o) - int(end.get(t, {}).get(p, 0))) for p, o in parts.items())
            for t, parts in latest.items()}


def run(config: Config, config_path: Path | None = None, on_batch=None, once: Callable[[], bool] | None = None,
        stop: StopRequest | None = None, metrics=None) -> int:
    """Run until a stop is requested (SIGTERM/SIGINT: after the current batch), or until `once()`
    says the work is done. A store that stays unreachable beyond the sinks' retries, or a broker
    that does not answer, fails the batch; the query is then restarted from its checkpoint after a
    pause (the batch is re-run: versioned writes make that safe). Lost topics and bad config end it
    with a typed error (pipelines/errors.from_spark_failure): a restart cannot help."""
    stop = stop or StopRequest().install()
    if stop.is_set():
        return 0
    claim_status(config.spark.checkpoint_dir)
    # Alive for readers on any host (status, a rebuild waiting for the batch in flight).
    with Heartbeat(config.spark.checkpoint_dir) as beat:
        return _run(config, config_path, on_batch, once, stop, metrics, beat)


def _run(config: Config, config_path: Path | None, on_batch, once: Callable[[], bool] | None,
         stop: StopRequest, metrics, beat: Heartbeat | None = None) -> int:
    from pipelines.spark.metrics import pipeline_metrics

    began = time.monotonic()
    spark = spark_session(config)
    # Where a start's time goes: on loaded cores the first batch can come a minute later.
    log.info("streaming: Spark session up in %.1f s", time.monotonic() - began)
    metrics = metrics if metrics is not None else pipeline_metrics(config)  # bootstrap brings its own
    with VisibilityPublisher(config, metrics, config_path) as publisher:
        return _run_queries(spark, config, config_path, on_batch, once, stop, metrics, publisher.written, beat)


def _run_queries(spark, config: Config, config_path: Path | None, on_batch, once: Callable[[], bool] | None,
                 stop: StopRequest, metrics, written: Callable[[], None] | None = None,
                 beat: Heartbeat | None = None) -> int:
    pause = RESTART_PAUSE_S
    slow_starts = 0   # starts in a row that failed on a Python worker too slow to connect back
    while True:
        gate = BatchGate()
        began = time.monotonic()
        try:
            query = start(spark, config, on_batch=on_batch, config_path=config_path, metrics=metrics, gate=gate,
                          written=written)
        except Exception as exc:  # noqa: BLE001 - only a worker too slow to connect back is started again
            query = _NeverStarted(exc)
            if WORKER_SLOW not in str(exc):
                raise
        resumed = committed_batch(config.spark.checkpoint_dir)
        if not isinstance(query, _NeverStarted):
            log.info("streaming: query started in %.1f s, %s", time.monotonic() - began,
                     "first run" if resumed is None else f"resuming after batch {resumed}")
        try:
            stopped = _follow(query, metrics, stop, once, gate, config.spark.checkpoint_dir)
        except BaseException:  # e.g. `once` found the connector failed: nothing left running
            gate.hurry.set()
            query.stop()
            spark.stop()
            raise
        failure = query.exception()
        gate.hurry.set()   # a batch waiting under load (batch_cadence.py) returns at once
        query.stop()  # the documents' query runs on when the tables' failed, and the other way round
        if failure is not None and stopped and gate.last is not None and batch_committed(
                config.spark.checkpoint_dir, gate.last):
            # Under load a batch returns past its trigger, so Spark plans the next one at once: the
            # stop may interrupt that one in a way Spark does not count as a stop. It is uncommitted
            # and runs again at the next start, like any batch a stop cuts short.
            log.info("the batch after %s was interrupted by the stop (%s); it runs again at the next start",
                     gate.last, _first_line(str(failure)))
            failure = None
        if failure is None:
            break
        text = str(failure)
        if gate.last is not None:
            # This run applied batches before it failed: a new outage, not the same one going on,
            # so its pause starts short again (it only grew while restarts kept failing at once).
            pause = RESTART_PAUSE_S
            slow_starts = 0
        slow_starts = slow_starts + 1 if WORKER_SLOW in text else 0
        if not (_restartable(text) or 0 < slow_starts <= WORKER_START_RETRIES) or stop.is_set():
            error = from_spark_failure(text)
            error.trace = text
            spark.stop()
            raise error
        log.warning("%s; restarting from the checkpoint in %.0f s (sooner once it answers again)",
                    _first_line(text), pause)
        if beat is not None:   # a rebuild then catches its fresh generation up itself (rebuild/phases.py)
            beat.pause(_first_line(text))
        try:
            if restart_pause.pause(stop, pause, restart_pause.readiness(config, text)):
                break
        finally:
            if beat is not None:
                beat.pause(None)
        pause = min(pause * 2, 60.0)
    spark.stop()
    if stop.is_set():
        log.info("stopped%s; `cdckit run` (or the same command) resumes from the checkpoint",
                 _stopped_after(gate.last, committed_batch(config.spark.checkpoint_dir)))
    return 0


def _stopped_after(applied: int | None, recorded: int | None) -> str:
    """The batch a stop ends after, as the checkpoint has it: a batch applied but not yet recorded
    when the query stopped is applied again at the next start (writes are versioned), and said so."""
    said = "" if recorded is None else f" after batch {recorded}"
    if applied is not None and (recorded is None or recorded < applied):
        said += f" (batch {applied} was applied but not yet recorded: the next start applies it again)"
    return said


RESTART_PAUSE_S = 5.0


class BatchGate:
    """Whether a batch is being applied, so a stop waits for exactly that batch and no other."""

    def __init__(self) -> None:
        self.idle = threading.Event()
        self.idle.set()
        self.hurry = threading.Event()   # set by a stop: a batch under load does not wait to return
        self.last: int | None = None
        self.current: int | None = None
        self.began = 0.0
        self.lag: dict[str, int] = {}   # records behind the topics' ends, from the last progress

    def begin(self, batch_id: int | None = None) -> None:
        self.current, self.began = batch_id, time.monotonic()
        self.idle.clear()

    def end(self, batch_id: int | None = None) -> None:
        if batch_id is not None:
            self.last = batch_id
        self.idle.set()


def _await_batch_end(gate: BatchGate) -> bool:
    """Wait for the batch in flight, saying every 15 s that it is awaited (a backlog's batch can
    take minutes; a second Ctrl-C stops at once)."""
    deadline = time.monotonic() + STOP_GRACE_S
    while not gate.idle.wait(15):
        if time.monotonic() > deadline:
            return False
        log.info("waiting for batch %s to finish (running for %.0f s)", gate.current, time.monotonic() - gate.began)
    return True


def _follow(query, metrics, stop: StopRequest, once: Callable[[], bool] | None, gate: BatchGate,
            checkpoint_dir: Path) -> bool:
    """Until the query ends or a stop (or `once()`) ends it: True when this stopped it."""
    while query.isActive:
        try:
            gate.lag = progress_lag(query.lastProgress)
            if metrics is not None:
                metrics.lags(gate.lag)
        except Exception:  # noqa: BLE001 - a metric must never stop the sync
            log.debug("lag not read", exc_info=True)
        if stop.is_set() or (once is not None and once()):
            gate.hurry.set()
            # Let the current batch finish, but not forever: a batch stuck on an unreachable store
            # is re-run from the checkpoint next time anyway. Stopped the moment it ends, so the
            # next trigger has (almost always) not begun; under load it may have (see _run_queries).
            if not _await_batch_end(gate):
                log.warning("batch %s did not finish within %.0f s; it is re-run on the next start",
                            gate.current, STOP_GRACE_S)
                logging.getLogger("py4j").setLevel(logging.CRITICAL)  # the cancelled batch's callback error
            elif gate.last is not None:  # and recorded (a stop before Spark's commit re-runs it)
                deadline = time.monotonic() + COMMIT_WAIT_S
                while (not batch_committed(checkpoint_dir, gate.last) and time.monotonic() < deadline
                       and query.isActive):   # a query that failed after the batch records nothing more
                    time.sleep(0.02)
            query.stop()
            return True
        try:
            query.awaitTermination(1)
        except Exception:  # noqa: BLE001 - the query failed; the caller reads query.exception()
            break
        if hasattr(query, "tend"):
            query.tend()
    return False


class _NeverStarted:
    """A start that failed before Spark had a query (its source's planning): read as a query that failed."""

    isActive = False
    lastProgress = None

    def __init__(self, failure: Exception):
        self.failure = failure

    def exception(self):
        return self.failure

    def stop(self) -> None:
        pass


_RESTARTABLE = ("StoreUnavailable", "KafkaUnavailable", "NoFetchResponse")
# Spark waits a fixed 10 s (not a setting) for a Python worker it starts to connect back, a Python
# data source's runner among them: on overloaded cores one missed it and the query never started.
# Restarted a few times in a row; a Python that cannot start at all fails the same way every time.
WORKER_SLOW = "Python worker failed to connect back"
WORKER_START_RETRIES = 3


def _restartable(text: str) -> bool:
    return any(name in text for name in _RESTARTABLE)


def _first_line(text: str) -> str:
    """The exception's own message out of the Python traceback Spark wraps it in."""
    import re

    found = re.findall(rf"(?:{'|'.join(_RESTARTABLE)}): (.+)", text)
    return (found[-1] if found else text.splitlines()[0])[:300]
