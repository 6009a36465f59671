"""`cdckit rebuild`: a derived store rebuilt from the compacted change topics alone, while readers
keep using the current generation.

Phases (each recorded in the rebuild state file, so a rerun resumes where it stopped):
1. plan: topics and the offset range [first, end) to replay, the fresh generations, a time estimate
   checked against the topics' `delete.retention.ms`.
2. bulk (Spark batch job): every partition folded to its last state per key, written into the fresh
   generations with versioned writes.
3. catch-up (Spark streaming, availableNow): from the planned end to the log's end. Before it starts
   the state file asks the live pipeline to write the fresh generations too, so everything after the
   catch-up's end reaches them as well; versions make the overlap harmless.
   Nested documents (`documents:`, with `rebuild all`) are built anew by a documents' query of the
   rebuild's own, from the earliest offsets into a state of its own (pipelines/state/documents_state.py
   says why not the live one), writing the fresh generations alone: once to the log's end, then
   again holding the documents' hand-over lock, under which the live documents' query writes
   nothing. `rebuild cache` alone carries the live documents over into its database instead.
4. switch: one alias update per index; SWAPDB for Redis; the rebuild's documents' state becomes the
   live one (the running job's documents' query moves to it). Then, once the live pipeline has
   finished the batch that may have been in flight, the old generation is dropped (unless kept).
   Unless records of the replay were dead-lettered (more than accepted, see rebuild_letters): then
   phase "refused" instead, the live pipeline stops writing the fresh generations, which are
   dropped once its batch in flight has finished; readers never leave the old generation.
"""
from __future__ import annotations

import logging
import shutil
import socket
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable


from connectors.kafka.clients import existing_topics, min_delete_retention
from connectors.kafka.offsets import begin_offsets, end_offsets
from derived.sinks.store_errors import GenerationError
from derived.sinks.search.generations import SearchGeneration
from pipelines.apply.stores import cache_generations, definitions, marker_definition, search_generations
from pipelines.config import Config
from pipelines.errors import CdckitError, RebuildRefused
from pipelines.rebuild import switch_gate as rebuild_letters
from pipelines.ops.faults import crash_point
from pipelines.state import documents_state
from pipelines.state import rebuild_state
from pipelines.state.rebuild_state import RebuildState, Targets
from pipelines.state.status_file import pipeline_paused
from pipelines.stopping import Interrupted, StopRequest

log = logging.getLogger("cdckit.rebuild")
ASSUMED_RATE = 15_000          # events/s, until a finished rebuild has measured this machine
RETENTION_SHARE = 0.5          # refuse when the estimate exceeds this share of delete.retention.ms
LIVE_BATCH_WAIT_S = 120.0


@dataclass
class Plan:
    rebuild_id: str
    stores: list[str]
    tables: list[str]
    topics: list[str]
    begin: dict[str, dict[str, int]]
    end: dict[str, dict[str, int]]
    search: dict[str, dict[str, Any]] = field(default_factory=dict)   # table -> alias/current/target
    cache: dict[str, int] | None = None                                 # live_db / spare_db
    documents: dict[str, str] | None = None     # {"folder": the rebuild's documents' state} when rebuilt
    estimate_s: float = 0.0
    retention_ms: int | None = None
    resumed_phase: str | None = None

    @property
    def records(self) -> int:
        return sum(int(o) - int(self.begin.get(t, {}).get(p, 0)) for t, parts in self.end.items()
                   for p, o in parts.items())

    @property
    def targets(self) -> Targets:
        return Targets(tuple(sorted((t, s["target"]) for t, s in self.search.items())),
                       self.cache["spare_db"] if self.cache else None)

    def as_json(self) -> dict[str, Any]:
        return {"rebuild_id": self.rebuild_id, "stores": self.stores, "tables": self.tables, "topics": self.topics,
                "begin": self.begin, "end": self.end, "records": self.records, "search": self.search,
                "cache": self.cache, "documents": self.documents, "estimate_s": round(self.estimate_s, 1), "retention_ms": self.retention_ms,
                "resumed_phase": self.resumed_phase}


def make_plan(config: Config, which: str, table: str | None) -> Plan:
    """What would be replayed where; resumes an unfinished rebuild instead of starting another."""
    state = rebuild_state.load(config.spark.checkpoint_dir)
    if state and state.phase != "done":
        plan = Plan(**{k: state.plan[k] for k in ("rebuild_id", "stores", "tables", "topics", "begin", "end",
                                                  "search", "cache", "estimate_s", "retention_ms")},
                    documents=state.plan.get("documents"))
        plan.resumed_phase = state.phase
        return plan
    stores = [s for s in ("search", "cache") if s in config.sinks] if which == "all" else [which]
    missing = [s for s in stores if s not in config.sinks]
    if missing:
        raise RebuildRefused(f"sinks: this config does not write {', '.join(missing)}")
    names = [t.name for t in config.flat_tables]
    if table is not None and table in [d.name for d in config.documents]:
        raise RebuildRefused(f"--table: {table} is a document: documents are rebuilt by `cdckit rebuild all`, "
                             "every document and both stores at once (they share one state)")
    if table is not None and table not in names:
        only = any(t.name == table and t.documents_only for t in config.tables)
        raise RebuildRefused(f"--table: {table} " + ("is read only by documents: it has no store of its own (`cdckit "
                                                     "rebuild all` rebuilds the documents)" if only else
                                                     "is not in the config's tables"))
    search_tables = [t for t in config.flat_tables if table in (None, t.name)] if "search" in stores else []
    # Documents only with every store: see _DocumentsReplay.
    search_docs = config.documents if which == "all" and table is None and "search" in stores else []
    # A Redis generation is a whole database: the cache is always rebuilt for every table and document.
    replayed = config.flat_tables if "cache" in stores else search_tables
    # The truncate markers too: the catch-up applies those it meets (the bulk reads them first).
    conf = config.kafka.client_config()
    topics = existing_topics(conf, [config.topic_for(t) for t in replayed] + [config.truncate_topic]) if replayed else []
    plan = Plan(uuid.uuid4().hex[:8], stores, [t.name for t in replayed], topics,
                begin_offsets(conf, topics) if topics else {}, end_offsets(conf, topics) if topics else {})
    if search_tables:
        generations = search_generations(config)
        for t in search_tables:
            gen = generations.plan(t.index_name)
            plan.search[t.name] = {"alias": gen.alias, "current": gen.current, "target": gen.target}
        for d in search_docs:
            gen = generations.plan(d.index_name)
            plan.search[d.store_table] = {"alias": gen.alias, "current": gen.current, "target": gen.target}
    if "cache" in stores:
        plan.cache = {"live_db": config.redis.db, "spare_db": config.redis.spare_db}
    if config.documents and which == "all" and table is None:
        plan.documents = {"folder": documents_state.fresh(config.spark.checkpoint_dir, plan.rebuild_id).name}
    elif config.documents and not _documents_state_fits(config):
        raise RebuildRefused("documents: their definitions changed since their state was built: "
                             "`cdckit rebuild all` builds them anew")
    plan.estimate_s = plan.records / (rebuild_state.measured_rate(config.spark.checkpoint_dir) or ASSUMED_RATE)
    plan.retention_ms = min_delete_retention(conf, topics)
    return plan


def _documents_state_fits(config: Config) -> bool:
    from pipelines.documents.document_specs import resolve_from_catalog, state_matches
    return state_matches(config, resolve_from_catalog(config), documents_state.current(config.spark.checkpoint_dir))


def check_safety(plan: Plan, force: bool) -> list[str]:
    """Refusals (unless forced) and warnings, as messages."""
    notes = []
    if plan.retention_ms is not None and plan.estimate_s * 1000 > RETENTION_SHARE * plan.retention_ms:
        text = (f"the replay of {plan.records:,} records is estimated at {plan.estimate_s:,.0f} s, more than "
                f"{RETENTION_SHARE:.0%} of the topics' delete.retention.ms ({plan.retention_ms / 1000:,.0f} s): "
                "tombstones could be compacted away mid-replay and deleted rows come back")
        if not force:
            raise RebuildRefused(text + "; rerun with --force to accept the risk")
        notes.append("forced: " + text)
    if not plan.topics:
        notes.append("no change topic exists yet: the fresh generation will be empty")
    return notes


@dataclass
class Callbacks:
    phase: Callable[[str], None] = lambda name: None
    bulk_progress: Callable[[dict[str, dict[str, Any]]], None] = lambda progress: None


def run(spark, config: Config, plan: Plan, keep_old: bool = False, cb: Callbacks | None = None,
        stop: StopRequest | None = None, accept_dead_letters: int = 0) -> RebuildState:
    """Carry the plan out from wherever it stopped; returns the state, with the summary. A stop
    request is honoured between phases, between bulk tasks and catch-up batches (Interrupted; a
    rerun resumes), never between the switch and its record. More dead-lettered records than
    `accept_dead_letters` (pipelines/rebuild/switch_gate.py): no switch, the fresh generations are
    dropped and the state ends "done" with the verdict in `state.dead_letters` (the caller says so)."""
    from pipelines.rebuild.spark_jobs import bulk

    cb = cb or Callbacks()
    stop = stop or StopRequest()

    def checkpoint(where: str) -> None:
        if stop.is_set():
            raise Interrupted(where)

    ckpt = config.spark.checkpoint_dir
    work = rebuild_state.work_dir(ckpt, plan.rebuild_id)
    state = rebuild_state.load(ckpt) if plan.resumed_phase else None
    if state is None:
        state = RebuildState(plan.as_json(), plan.targets, started_at=time.time())
        rebuild_state.save(ckpt, state)
    resuming = plan.resumed_phase is not None
    if state.phase == "planned":
        cb.phase("creating generations")
        _create_generations(config, plan, resuming)
        _advance(ckpt, state, "bulk")
    if state.phase == "bulk":
        checkpoint("before the bulk replay")
        if plan.tables:
            cb.phase("bulk replay")
            started = time.monotonic()
            state.summary["bulk"] = bulk(spark, config, plan, work, cb.bulk_progress, stop)
            state.summary["bulk"]["seconds"] = round(time.monotonic() - started, 1)
        _advance(ckpt, state, "catchup")
    if state.phase == "catchup":
        checkpoint("before the catch-up")
        with ExitStack() as held:  # the fresh generations' writer lock, when this process replays
            documents = _DocumentsReplay(spark, config, plan, stop) if plan.documents else None
            if documents is not None and not documents.adopted:
                # Before the tables' catch-up, which may hold the writer lock the live tables wait on.
                cb.phase("documents: replay into the fresh generations")
                documents.replay()
                checkpoint("after the documents' replay")
            if plan.tables:
                started = time.monotonic()
                state.summary["catchup"] = _catch_up(spark, config, plan, work, state, cb, held, stop)
                state.summary["catchup"]["seconds"] = round(time.monotonic() - started, 1)
            checkpoint("after the catch-up, before the switch")
            if documents is not None and not documents.adopted:
                # The live documents' batches wait on its lock from here: the rest of the log reaches
                # the fresh generations, which switch, and the state that built them becomes the live one.
                cb.phase("documents: the last stretch")
                documents.finish(held)
                state.summary["documents"] = documents.summary()
            elif plan.cache:
                # The documents (when not rebuilt) and the visibility position are carried over into
                # the spare database at the switch (_switch): none may be written meanwhile.
                held.enter_context(documents_state.handover_lock(ckpt))
            if not (state.dead_letters or {}).get("switch"):   # a rerun after the switch began keeps to it
                live = rebuild_state.live_caught_up(ckpt, state.catchup_epoch)
                state.dead_letters = rebuild_letters.verdict(state.summary, live, accept_dead_letters)
            if state.dead_letters["switch"]:
                rebuild_state.save(ckpt, state)   # the verdict, before anything switches
                cb.phase("switching")
                state.live_batch_at_switch = _live_batch(config)
                _switch(config, plan)
                if documents is not None:
                    documents.adopt()
                crash_point("rebuild.after_switch")   # the drill's worst moment: switched, not yet recorded
                state.dual_write = False
                state.switched_at = time.time()
                _advance(ckpt, state, "switched")
            else:
                if documents is not None and not documents.adopted:
                    documents_state.cancel_handover(ckpt)   # the old documents' state goes on
                # The live pipeline stops writing the fresh generations; the batch in flight is
                # awaited before they are dropped (it would create a dropped index again).
                state.dual_write = False
                state.live_batch_at_switch = _live_batch(config)
                _advance(ckpt, state, "refused")
    if state.phase == "refused":
        cb.phase("dropping the fresh generation")
        _drop_fresh(config, plan)
        state.summary["fresh_generation"] = "dropped"
        _finish(config, state, work)
    if state.phase == "switched":
        if plan.cache:
            _cache(config, plan).finish(plan.rebuild_id)
        dropped = False
        if not keep_old:
            cb.phase("dropping the old generation")
            dropped = _drop_old(config, plan)
        state.summary["old_generation"] = "dropped" if dropped else "kept"
        _finish(config, state, work)
    return state


def _finish(config: Config, state: RebuildState, work) -> None:
    _remember_rate(config, state)
    _advance(config.spark.checkpoint_dir, state, "done")
    rebuild_state.keep_final_copy(work, state)
    # The bulk's progress group in Kafka has served (its result is in the state's summary).
    rebuild_state.progress_board(config.kafka.client_config(), state.plan["rebuild_id"]).forget()


class _DocumentsReplay:
    """The rebuild's documents' query: a state of its own from the earliest offsets (see
    pipelines/state/documents_state.py), writing the fresh generations alone, each run to the log's end.

    Only with every store (`rebuild all`): the old state and this one must never write one store
    together. A document's version is its state's history (the versions it handed out): a state
    that read one partition further than another may have handed out a document at a version
    the other never reached, so a delete from the other would be refused (the row comes back).
    So each store's documents come from one state: the old one's until the switch, this one's
    after; between the last run and the hand-over, the live documents' batches wait (the lock,
    then `pending` should this process die in between, until a rerun completes it)."""

    def __init__(self, spark, config: Config, plan: Plan, stop: StopRequest):
        from pipelines.documents.document_specs import resolve_from_catalog
        self.spark, self.config, self.plan, self.stop = spark, config, plan, stop
        self.ckpt = config.spark.checkpoint_dir
        self.folder = self.ckpt / str(plan.documents["folder"])
        self.adopted = documents_state.current(self.ckpt) == self.folder   # a rerun after the hand-over
        cache_db = None
        if plan.cache:
            # A rerun after SWAPDB (killed before the hand-over): the fresh generation is the live database now.
            swapped = _cache(config, plan).switched(plan.rebuild_id)
            cache_db = plan.cache["live_db"] if swapped else plan.cache["spare_db"]
        self.targets = Targets(tuple(sorted((t, s["target"]) for t, s in plan.search.items()
                                            if t.startswith("document:"))), cache_db)
        self.totals: dict[str, int] = {}
        self.seconds = 0.0
        self.resolved = None if self.adopted else resolve_from_catalog(config)

    def replay(self) -> None:
        self._run()

    def finish(self, held: ExitStack) -> None:
        """The last stretch, holding the hand-over lock until the rebuild's end (`held`)."""
        held.enter_context(documents_state.handover_lock(self.ckpt))
        documents_state.begin_handover(self.ckpt, self.folder)
        try:
            self._run()
        except BaseException:
            documents_state.cancel_handover(self.ckpt)  # not switched: the old state goes on
            raise

    def _run(self) -> None:
        from pipelines.documents import documents_query
        from pipelines.rebuild.spark_jobs import config_json

        started = time.monotonic()
        query = documents_query.start(self.spark, self.config, config_json(self.config), self.resolved, self.folder,
                                      targets=self.targets, available_now=True, totals=self.totals)
        try:
            while query.isActive:
                if self.stop.is_set():
                    raise Interrupted("in the documents' replay (a rerun goes on from where it stopped)")
                query.awaitTermination(1)
        finally:
            query.stop()
        self.seconds += time.monotonic() - started
        if query.exception() is not None:
            raise CdckitError(f"rebuild: the documents' replay failed: {query.exception()}")

    def summary(self) -> dict[str, Any]:
        return {**self.totals, "seconds": round(self.seconds, 1)}

    def adopt(self) -> None:
        documents_state.adopt(self.ckpt, self.folder)


LIVE_GONE_S = 15.0    # a live pipeline not seen for this long is taken as stopped
LIVE_STUCK_S = 30.0   # nor one whose batches stopped finishing (failing on a lost store, or no data)


def _catch_up(spark, config: Config, plan: Plan, work, state: RebuildState, cb: Callbacks, held: ExitStack,
              stop: StopRequest) -> dict[str, Any]:
    """From the bulk's end to the log's end, by one writer (see state/rebuild_state.LiveDuty): the live
    pipeline when one runs (on any host: its heartbeat), else this process, which then holds the writer lock until
    its switch (a live pipeline started meanwhile waits on it). Decided again on a rerun: every
    hand-over replays from the plan's end (a new epoch), as writes of an earlier one may have landed."""
    from pipelines.rebuild.spark_jobs import catchup, reset_catchup

    ckpt = config.spark.checkpoint_dir
    if _live_batch(config, finished_within_s=LIVE_STUCK_S) is not None and not pipeline_paused(ckpt):
        _hand_over(ckpt, state, rebuild_state.CATCHUP_BY_LIVE)
        cb.phase("catch-up (by the live pipeline)")
        done = _await_live_catch_up(config, state.catchup_epoch, stop)
        if done is not None:
            return {"by": "live pipeline", **{k: v for k, v in done.items() if k != "epoch"}}
    held.enter_context(rebuild_state.writer_lock(ckpt))   # after a live batch in flight
    _hand_over(ckpt, state, rebuild_state.CATCHUP_BY_REBUILD)
    reset_catchup(work)
    cb.phase("catch-up")
    return {"by": "rebuild", **catchup(spark, config, plan, work, state.summary["bulk"]["fences"], stop)}


def _hand_over(ckpt: Path, state: RebuildState, by: str) -> None:
    """dual_write and who replays, in one save: the live pipeline never reads one without the other."""
    state.dual_write, state.catchup_by, state.catchup_epoch = True, by, uuid.uuid4().hex[:8]
    rebuild_state.save(ckpt, state)


def _await_live_catch_up(config: Config, epoch: str | None, stop: StopRequest) -> dict[str, Any] | None:
    """The live pipeline's report once it has replayed the stretch and finished one more batch,
    which it wrote to the fresh generation too; None if it stopped first, or runs no batch (an idle
    log without heartbeats: Spark starts no micro-batch without data).
    Why one more batch: the cleaner may have dropped a record of the stretch for a later one of its
    key past the stretch's end (it keeps a key's last record); that record was in the log before
    the stretch was read, so the next batch, planned after it, holds it."""
    seen = advanced = time.monotonic()
    last = _live_batch(config)
    while True:
        done = rebuild_state.live_caught_up(config.spark.checkpoint_dir, epoch)
        if done is not None and (last or -1) > done["batch_id"]:
            return done
        now, batch = time.monotonic(), _live_batch(config)
        if batch is not None:
            seen = now
            if batch != last:
                last, advanced = batch, now
        if now - seen > LIVE_GONE_S or now - advanced > LIVE_STUCK_S or pipeline_paused(config.spark.checkpoint_dir):
            return None   # (paused: its query failed, e.g. on the store this rebuild restores; it waits for the switch)
        if stop.wait(0.5):
            raise Interrupted("while the live pipeline replays the catch-up (it goes on; a rerun waits for it)")


def _advance(ckpt: Path, state: RebuildState, phase: str) -> None:
    state.phase = phase
    rebuild_state.save(ckpt, state)


def _create_generations(config: Config, plan: Plan, resuming: bool) -> None:
    if plan.search:
        generations = search_generations(config)
        # The definition as the config and the catalog say now: a changed one lands here, in a
        # fresh generation, never in the live index.
        wanted = definitions(config, list(plan.search))
        for name, s in plan.search.items():
            generations.create(_generation(s), wanted.get(name), resume=resuming)
    if plan.cache:
        cache = _cache(config, plan)
        cache.check_spare(resuming)
        cache.begin(plan.rebuild_id)


def _generation(s: dict[str, Any]) -> SearchGeneration:
    return SearchGeneration(s["alias"], s["current"], s["target"])


def _cache(config: Config, plan: Plan):
    """The cache's generations: the live and the spare database the plan names."""
    return cache_generations(config, plan.cache["live_db"], plan.cache["spare_db"])


def _switch(config: Config, plan: Plan) -> None:
    """The markers go in first, so the live pipeline never sees a switched store without one."""
    if plan.search:
        generations = search_generations(config)
        generations.mark(config.topic_prefix, marker_definition(config))
        for s in plan.search.values():
            generations.switch(_generation(s))
    if plan.cache:
        cache = _cache(config, plan)
        cache.mark(config.topic_prefix, f"rebuild {plan.rebuild_id}")
        if config.documents and not plan.documents and not cache.switched(plan.rebuild_id):
            # Documents not rebuilt (`rebuild cache`): their query keeps them, so they move to the
            # new database as they are, with their versions (the live state's history).
            from derived.sinks.cache.sink import CacheTable, RedisCache

            tables = [CacheTable(d.redis_key_template) for d in config.documents]
            cache.carry_over([t.pattern() for t in tables], [RedisCache.COUNT_PREFIX + t.key_template for t in tables])
        if not cache.switched(plan.rebuild_id):
            cache.carry_visible(config.topic_prefix)
        cache.switch(plan.rebuild_id)


def _live_batch(config: Config, finished_within_s: float | None = None) -> int | None:
    """The live pipeline's last finished batch, if it is running (on any host: its heartbeat; and,
    given `finished_within_s`, finished a batch that recently)."""
    from pipelines.state.status_file import pipeline_running, process_alive, read_status

    st = read_status(config.spark.checkpoint_dir)
    running = pipeline_running(config.spark.checkpoint_dir)
    if running is None:  # a checkpoint from before heartbeats: only a process on this host is seen
        running = bool(st) and st.get("host") == socket.gethostname() and process_alive(st.get("pid"))
    if not st or not running:
        return None
    if finished_within_s is not None and time.time() - float(st.get("finished_at") or 0) > finished_within_s:
        return None
    return int(st["batch_id"])


def _live_writes_finished(config: Config) -> bool:
    """No live batch writes the generation about to be dropped any more; asked once `dual_write` is
    off on disk (phase switched or refused). With the live pipeline on this host (or none), its
    writer lock says so at once (rebuild_state.writers_done), even on an idle log. A pipeline on
    another host may not share the lock, so there the next batch to finish says it: a batch reads its
    duty as it starts, so the one in flight at this reading is the last that can. (Read at the
    switch, before that save, a batch begun during the switch was missed: it wrote the old Redis
    database after its drop.) False after LIVE_BATCH_WAIT_S."""
    from pipelines.state.status_file import read_status

    ckpt = config.spark.checkpoint_dir
    status = read_status(ckpt)
    if not status or status.get("host") == socket.gethostname():
        return rebuild_state.writers_done(ckpt, LIVE_BATCH_WAIT_S)
    return _await_live_batch(config, _live_batch(config))


def _await_live_batch(config: Config, batch_at: int | None) -> bool:
    """The live pipeline's batch in flight at `batch_at` has finished (or no pipeline runs); False
    after LIVE_BATCH_WAIT_S."""
    if batch_at is None:
        return True
    deadline = time.monotonic() + LIVE_BATCH_WAIT_S
    gone = 0  # readings in a row that saw no live pipeline: one could be a file system's hiccup
    while True:
        now = _live_batch(config)
        gone = gone + 1 if now is None else 0
        if gone >= 3 or (now is not None and now > batch_at):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)


def _drop_fresh(config: Config, plan: Plan) -> None:
    """A refused rebuild's fresh generations go, never a live one (drop_generation refuses an index
    behind its alias; the spare database is emptied only while it holds this rebuild). Dropped even
    when the batch in flight outlasts the wait: a spare database left full refuses the next rebuild."""
    if not _live_writes_finished(config):
        log.warning("rebuild %s: the live batch in flight did not finish within %.0f s; dropping the fresh "
                    "generation anyway", plan.rebuild_id, LIVE_BATCH_WAIT_S)
    if plan.search:
        generations = search_generations(config)
        for s in plan.search.values():
            generations.drop(s["target"], s["alias"])
    if plan.cache:
        _cache(config, plan).discard(plan.rebuild_id)
    if plan.documents:
        ckpt = config.spark.checkpoint_dir
        folder = ckpt / str(plan.documents["folder"])
        if folder != documents_state.current(ckpt):
            shutil.rmtree(folder, ignore_errors=True)


def _drop_old(config: Config, plan: Plan) -> bool:
    """A batch in flight at the switch may still write the old generation: wait for it to finish."""
    if not _live_writes_finished(config):
        return False
    if plan.search:
        generations = search_generations(config)
        for s in plan.search.values():
            if s["current"]:
                generations.drop(s["current"], s["alias"])
    if plan.cache:
        _cache(config, plan).drop_old()
    return True


def _remember_rate(config: Config, state: RebuildState) -> None:
    bulk = state.summary.get("bulk", {})
    if bulk.get("records", 0) >= 10_000 and bulk.get("seconds"):
        rebuild_state.remember_rate(config.spark.checkpoint_dir, bulk["records"] / bulk["seconds"])


__all__ = ["GenerationError", "Plan", "RebuildRefused", "make_plan", "check_safety", "run"]
