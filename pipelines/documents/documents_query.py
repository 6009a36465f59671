"""Nested documents (`documents:` in the config) as a second Structured Streaming query beside the
flat one: the change topics of every table a document names, grouped by document, folded by
`applyInPandasWithState` into the state model (derived/nested.py), whose state lives in the
query's checkpoint (RocksDB state store); the documents a batch changed are written to both stores
with versioned writes. With cdckit's Kafka source (the default) a batch brings each document's task
its offset ranges, not its records: the task reads them itself, and the live query's task writes
the documents too, while the state is pickled (records and documents through the JVM cost more
than their fold: benchmarks/README.md, nested documents).

Why one state object per document, not one per root key (the measurement is benchmarks/nested_state.py):
- the state is relational: a customer's row belongs to every order pointing at it, a line that
  moves leaves one order for another, a link row ties two tables. Keyed by root, each change would
  first need the roots it reaches, which is state keyed by the parent's key: two chained stateful
  operators, and a fan-out shuffle between them for every change;
- per-key state calls are what is slow: `transformWithStateInPandas` keyed by root folded 1,318
  facts/s, one state per document here 3,210 facts/s at 3,000 facts per micro-batch, its cost per
  micro-batch (~0.7 s), not per fact: the model itself folds ~50k facts/s in one Python process.
- an intermediate compacted topic keyed by root would hold documents, not the rows they are built
  from: building one still needs every table's rows (state), so it adds a hop and removes nothing.
The cost: the state value is serialized once per batch, in proportion to the tables' rows (see
the benchmark), and one document's fold runs on one core (several documents run in parallel).

Exactly once with respect to the stores: the state of batch N is committed with batch N; a crash
re-runs N from the state of N-1, computing the same documents with the same versions.
"""
from __future__ import annotations

import io
import logging
import pickle
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import orjson
import pyarrow as pa

from derived.change import Change, DeadLetter, Position, Version
from pipelines.apply.batch import apply_changes
from pipelines.apply.stats import BatchStats
from pipelines.documents.document_specs import ResolvedDocuments, check_state_matches, state_matches
from pipelines.documents import saved_state
from pipelines.documents.nested_fold import FoldState, FoldStats, fold_batch
from pipelines.spark.stop_interruption import compact_interruptions, stopped_on_purpose
from pipelines.spark.worker_context import collector_paused, worker_resources
from pipelines.apply.transaction_gate import LATE_MS
from pipelines.config import Config
from pipelines.errors import ConfigError
from pipelines.state import documents_state
from pipelines.state import rebuild_state
from pipelines.state.rebuild_state import Targets

log = logging.getLogger("cdckit.documents")

OUT_DDL = ("document string, doc_id string, key binary, body binary, deleted boolean, epoch long, kind int, "
           "lsn long, stats binary")
STATE_DDL = "blob binary"
WRITE_STATS = pa.schema([("documents", pa.int64()), ("search_applied", pa.int64()), ("search_stale", pa.int64()),
                         ("cache_applied", pa.int64()), ("cache_stale", pa.int64()), ("dead_letters", pa.int64()),
                         ("stores_s", pa.float64()), ("fold", pa.binary())])


def checkpoint(config: Config) -> Path:
    """The live state's folder (a rebuild moves it: pipelines/state/documents_state.py)."""
    return documents_state.current(config.spark.checkpoint_dir)


def stream(spark, config: Config):
    """What each document's fold reads, one row per (row, document): with cdckit's Kafka source, the
    batch's offset ranges, which the fold's task reads itself (`_range_records`); with Spark's
    own, the change records."""
    from pyspark.sql import functions as F

    from pipelines.spark.change_topics import topic_reader

    routes = config.document_topics
    pattern = "^(" + "|".join(re.escape(t) for t in routes) + ")$"
    route = F.create_map(*[x for t, names in routes.items() for x in (F.lit(t), F.array(*map(F.lit, names)))])
    document = F.explode(F.element_at(route, F.col("topic"))).alias("document")
    if config.spark.kafka_source == "python":
        # Ranges, not records: every record taken through the JVM, the shuffle to the document's
        # task and pandas cost ~0.1 ms (benchmarks/README.md, nested documents), more than its fold;
        # a dozen range rows, yielded by one task, cost nothing, and the task's kept consumer reads
        # the records.
        ranges = topic_reader(spark, config, pattern, ranges=True).option("tasks", "1").load()
        return ranges.select("topic", "partition", "start", "end", document)
    records = topic_reader(spark, config, pattern, ranges=False).load()
    # A transaction's BEGIN record tells the fold nothing (its END carries the counts): a quarter of
    # the records of two-row transactions, dropped before the shuffle.
    begin = (F.col("topic") == F.lit(config.transaction_topic)) & F.coalesce(
        F.instr(F.col("value").cast("string"), BEGIN.decode()) > 0, F.lit(False))
    # As many read tasks as cores, not one per topic partition (ten for three tables): the fold
    # orders records itself, and each task costs the scheduler and the executor the same.
    records = records.coalesce(spark.sparkContext.defaultParallelism)
    return records.where(~begin).select("key", "value", "topic", F.col("partition").cast("int").alias("partition"),
                          F.col("offset").cast("long").alias("offset"),
                          F.expr("unix_millis(timestamp)").alias("timestamp"), document)


BEGIN = b'"status":"BEGIN"'


def _range_records(config_json: bytes, frames: list) -> list[dict[str, Any]]:
    """The records of the offset ranges in `frames` (one range a row), as the records mode's rows,
    without the transactions' BEGIN records."""
    from connectors.kafka.ranges import range_records
    from pipelines.spark.worker_context import kafka_settings, worker_config

    transactions = worker_config(config_json).transaction_topic
    ranges = (r for f in frames for r in zip(*(f[c].tolist() for c in ("topic", "partition", "start", "end"))))
    return [row for rows in range_records(kafka_settings(config_json), ranges, timestamps=True,
                                          skip=lambda topic, value: topic == transactions and value is not None
                                          and BEGIN in value)
            for row in rows]


_RECORD_FIELDS = ("key", "value", "topic", "partition", "offset", "timestamp")


def fold_fn(config_json: bytes, resolved: ResolvedDocuments, writes: bool = False):
    """The applyInPandasWithState function: one call per document and batch. `writes`: the task
    writes the documents itself and yields only its figures (the live query: a second Python
    worker and the documents' trip through the JVM to it cost more than the writes); else it yields
    them for `write_fn` (a rebuild's large batches, written by as many tasks as cores)."""

    def run(key, frames, state) -> Iterator[Any]:
        import pandas as pd

        name = key[0]
        # Before the state is loaded: their first call per worker settles it (a full collection).
        decoding, reread = _decoding(config_json, resolved), _rereader(config_json)
        resources = worker_resources(config_json) if writes else None
        with collector_paused():
            t0, cpu0 = time.perf_counter(), time.process_time()
            held, saved, kept = _load(state, resolved, name, config_json)
            t1 = time.perf_counter()
            frames = list(frames)
            if frames and "start" in frames[0].columns:   # ranges (stream): read here
                rows = _range_records(config_json, frames)
            else:
                rows = [dict(zip(_RECORD_FIELDS, values)) for f in frames
                        for values in zip(*(f[c].tolist() for c in _RECORD_FIELDS))]
            t_rows = time.perf_counter()
            outs, stats, _ = fold_batch(held, rows, *decoding, reread=reread)
            t2 = time.perf_counter()
            writing = None
            if resources is not None:   # while the state is pickled: the writes mostly wait on the servers
                writing = _writer().submit(_write_documents, *resources, *_as_written(name, outs))
            t3 = time.perf_counter()
            try:
                blob, saved, _ = saved_state.save(held, saved, _delta(held))
                state.update((blob,))
            except BaseException:
                if writing is not None:   # no write outlives its task (a hand-over may follow)
                    wait([writing])
                raise
            del rows, frames   # freed before the collector is back: its next collection would walk them
        save_s = time.perf_counter() - t3
        written = writing.result() if writing is not None else None
        # Once the writes are done too (what they held is gone, not frozen with the state).
        t4 = time.perf_counter()
        saved_state.keep(name, saved, held)
        del held
        save_s += time.perf_counter() - t4   # (its collection of what the task left)
        # The task's CPU (its writes' thread too) beside its time: on busy cores the gap is the wait to run.
        stats.timings = {"load_s": t1 - t0, "rows_s": t_rows - t1, "fold_s": t2 - t_rows, "save_s": save_s,
                         "state_bytes": len(blob), "cpu_s": time.process_time() - cpu0, "kept": kept}
        if writing is not None:
            yield pd.DataFrame({k: [v] for k, v in _stats_row(name, stats, written).items()})
            return
        frame = {"document": [name] * len(outs), "doc_id": [o.doc_id for o in outs],
                 "key": [orjson.dumps(o.key, default=str) for o in outs],
                 "body": [orjson.dumps(o.doc, default=str) if o.doc is not None else None for o in outs],
                 "deleted": [o.doc is None for o in outs], "epoch": [o.version.epoch for o in outs],
                 "kind": [o.version.kind for o in outs], "lsn": [o.version.lsn for o in outs],
                 "stats": [None] * len(outs)}
        figures = _stats_row(name, stats)
        frame = {k: v + [figures[k]] for k, v in frame.items()}  # the fold's figures last
        yield pd.DataFrame(frame)

    return run


_writers: list[ThreadPoolExecutor] = []


def _writer() -> ThreadPoolExecutor:
    if not _writers:
        _writers.append(ThreadPoolExecutor(1, thread_name_prefix="cdckit-documents-write"))
    return _writers[0]


def _as_written(name: str, outs) -> tuple[list[Change], list[bytes | None]]:
    """The fold's documents as write_fn has them (keys and bodies through JSON, default=str), with
    their bodies."""
    changes, bodies = [], []
    for o in outs:
        body = orjson.dumps(o.doc, default=str) if o.doc is not None else None
        changes.append(_as_change({"document": name, "doc_id": o.doc_id, "deleted": o.doc is None,
                                   "key": orjson.dumps(o.key, default=str), "body": body,
                                   "epoch": o.version.epoch, "kind": o.version.kind, "lsn": o.version.lsn},
                                  len(changes)))
        bodies.append(body)
    return changes, bodies


def _stats_row(name: str, stats: FoldStats, written: dict[str, Any] | None = None) -> dict[str, Any]:
    """The fold's figures, and the writes' when the fold's task wrote (a WRITE_STATS row)."""
    body = stats.__dict__ if written is None else {**stats.__dict__, "written": written}
    return {"document": name, "doc_id": None, "key": None, "body": None, "deleted": None, "epoch": None,
            "kind": None, "lsn": None, "stats": orjson.dumps(body)}


OLD_MODULE = b"pipelines.apply.nested_fold"


class _StateUnpickler(pickle.Unpickler):
    """States pickled before the documents' modules moved into pipelines/documents/ (0.1.0) name
    the fold's class by its old module: found at its new one, so a job upgraded in place resumes."""

    MOVED = {"pipelines.apply.nested_fold": "pipelines.documents.nested_fold"}

    def find_class(self, module: str, name: str):
        return super().find_class(self.MOVED.get(module, module), name)


def _load(state, resolved: ResolvedDocuments, name: str,
          config_json: bytes) -> tuple[FoldState, saved_state.Saved | None, bool]:
    """(the state, how it was saved, whether this worker kept it from the document's last batch)."""
    from derived.nested import NestedState

    def fresh() -> FoldState:
        spec = resolved.spec(name)
        return FoldState(NestedState(spec, {t: resolved.keys[t] for t in spec.tables()}), gate=_gate(config_json))

    def unpickle(blob) -> FoldState:
        if isinstance(blob, memoryview):   # a base: pickled by this version, under the modules' new names
            held = pickle.loads(blob)
        else:   # a state saved whole (before bases); the unpickler that finds moved classes is slower
            held = _StateUnpickler(io.BytesIO(blob)).load() if OLD_MODULE in blob else pickle.loads(blob)
        if getattr(held, "gate", None) is None:   # a state pickled before the gate existed
            held.gate = _gate(config_json)
        return held

    return saved_state.load(state.get[0] if state.exists else None, name, fresh, unpickle, _apply_delta)


def _delta(held: FoldState) -> dict[str, Any]:
    """What a batch changed in the state (saved after the state's base: pipelines/documents/saved_state.py)."""
    return {"model": held.model.take_changes(), "fences": dict(held.fences), "gate": held.gate}


def _apply_delta(held: FoldState, delta: dict[str, Any]) -> None:
    held.model.apply_changes(delta["model"])
    held.fences, held.gate = delta["fences"], delta["gate"]


def _gate(config_json: bytes):
    """Whole transactions only (pipelines/apply/transaction_gate.py) for every table topic a document
    reads, the truncate markers' included (a TRUNCATE and the rows written after it in one transaction
    go together)."""
    from pipelines.apply.transaction_gate import TransactionGate
    from pipelines.spark.worker_context import worker_config

    config = worker_config(config_json)
    return TransactionGate(config.topic_prefix, frozenset(config.document_change_topics), config.transaction_topic)


def _rereader(config_json: bytes):
    """Unchanged TOAST columns of rows the state does not hold, read from Postgres (as the tables do)."""
    from pipelines.spark.worker_context import worker_resources

    toast = worker_resources(config_json)[0].toast
    return None if toast is None else (lambda changes: toast.fill(changes, every_upsert=True))


_decoders: dict[bytes, tuple] = {}


def _decoding(config_json: bytes, resolved: ResolvedDocuments) -> tuple:
    """(key columns, truncate table, typed converters) of a config, once per Python worker. The
    converters follow the catalog (issue #38.3: they were the types read at the job's start, so an
    ALTER ... TYPE left re-read rows rendered by the old type for good)."""
    if config_json not in _decoders:
        from pipelines.spark.worker_context import worker_config, worker_resources

        config = worker_config(config_json)
        numbers = {t.name: frozenset(t.numeric_as_number) for t in config.tables}
        types = worker_resources(config_json)[0].types
        typed = (LiveTypes(types, numbers, set(resolved.types)) if types is not None
                 else _fixed_types(resolved, numbers))
        _decoders[config_json] = ({t.name: t.key for t in config.tables}, config.postgres.truncate_table, typed)
    return _decoders[config_json]


def _fixed_types(resolved: ResolvedDocuments, numbers: dict[str, frozenset[str]]) -> dict:
    from connectors.typed_values import row_converter

    return {t: row_converter(types, numbers.get(t, frozenset())) for t, types in resolved.types.items()}


class LiveTypes:
    """Typed converters per table from the worker's column types (pipelines/apply/column_types.py),
    as the tables' documents are rendered: a type change is seen within its ttl and RECHECK_S (the
    schema watch's re-read then writes every row again), a column a row carries that was not looked
    for, at once."""

    # Asked of the column types at most this often per table (unless a row carries a column not looked
    # for): once per row was ~8% of a fold, and they are read again only every ttl_s anyway.
    RECHECK_S = 1.0

    def __init__(self, types, numbers: dict[str, frozenset[str]], tables: set[str]):
        self.types, self.numbers, self.tables = types, numbers, tables
        self._made: dict[str, tuple[dict[str, str], Any, float]] = {}

    def get(self, table: str):
        if table not in self.tables:
            return None
        return lambda row: self.converter(table, row)(row)

    def converter(self, table: str, row: dict[str, Any]):
        from connectors.typed_values import row_converter

        made = self._made.get(table)
        now = self.types.clock()
        if made is not None and now < made[2] and row.keys() <= made[0].keys():
            return made[1]
        types = self.types.of({table: set(row)})[table]
        if made is None or made[0] is not types:   # the same dict until the types are read again
            made = (types, row_converter(types, self.numbers.get(table, frozenset())), 0.0)
        self._made[table] = (made[0], made[1], now + self.RECHECK_S)
        return made[1]


def write_fn(config_json: bytes, targets: Targets | None = None):
    """mapInArrow over the fold's output: the documents into both stores (given `targets`: a
    rebuild's fresh generations alone), one stats row per task."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        folds: list[dict] = []
        written = []
        stores, dlq = worker_resources(config_json)
        if targets is not None:
            stores = worker_resources(config_json, targets)
        for rb in batches:
            changes, bodies = [], []
            for r in rb.to_pylist():
                if r["doc_id"] is None:
                    folds.append(orjson.loads(r["stats"]))
                    continue
                changes.append(_as_change(r, len(changes)))
                bodies.append(r["body"])
            written.append(_write_documents(stores, dlq, changes, bodies))
        yield pa.RecordBatch.from_pylist([{**_sum_written(written), "fold": orjson.dumps(folds)}], schema=WRITE_STATS)

    return run


def _write_documents(stores, dlq, changes: list[Change], bodies: list[bytes | None]) -> dict[str, Any]:
    """Documents (`changes`, their bodies as JSON) into the stores (a worker's: worker_resources); a
    document the engine refuses is dead-lettered with its id and body (see apply_changes). Returns
    WRITE_STATS' figures. Runs in a thread beside the state's pickling: it imports nothing and builds
    no client (worker_context.settle would collect and freeze the state being pickled)."""
    if not changes:
        return dict.fromkeys(WRITE_STATS.names[:-1], 0)
    totals = BatchStats()
    t0 = time.perf_counter()
    dead: list[DeadLetter] = []
    raw = [{"topic": c.position.topic, "partition": 0, "offset": i, "key": c.doc_id.encode(), "value": body}
           for i, (c, body) in enumerate(zip(changes, bodies))]
    apply_changes(stores, [], changes, totals, dead, raw)
    for letter in dead:   # `cdckit dlq replay` writes the document again at this version
        letter.extra = {**letter.extra, "version": changes[letter.position.offset].version.redis()}
    if dead:
        totals.dead_letters += dlq.write(dead)
    return {"documents": len(changes), "search_applied": totals.search_applied, "search_stale": totals.search_stale,
            "cache_applied": totals.cache_applied, "cache_stale": totals.cache_stale,
            "dead_letters": totals.dead_letters, "stores_s": time.perf_counter() - t0}


def _sum_written(parts: list[dict[str, Any]]) -> dict[str, Any]:
    names = WRITE_STATS.names[:-1]
    return {k: sum(p[k] for p in parts) for k in names}


def _written_row(stats: bytes) -> dict[str, Any]:
    """A fold task's figures (`_stats_row`) as write_fn's WRITE_STATS row."""
    fold = orjson.loads(stats)
    return {**fold.pop("written"), "fold": orjson.dumps([fold])}


def _as_change(r: dict[str, Any], offset: int) -> Change:
    table = f"document:{r['document']}"
    version = Version(r["epoch"], r["kind"], r["lsn"])
    position = Position(table, 0, offset)
    key = orjson.loads(r["key"])
    if r["deleted"]:
        return Change(table, "delete", key, r["doc_id"], None, version, position)
    return Change(table, "upsert", key, r["doc_id"], orjson.loads(r["body"]), version, position)


def ensure_indexes(config: Config, stores) -> None:
    """Each document's index, created when missing (a rebuild replaces it)."""
    if "search" not in config.sinks:
        return
    for doc in config.documents:
        stores.search.prepare(stores.search_tables[doc.store_table])   # idempotent


class ColumnDrift:
    """The live documents' own schema watch, before a batch (the tables' watch is another query's,
    and may see a DDL later). A column the documents use changing type, or gone: under
    `on_schema_change: stop` the job stops before a change of the new shape is folded; a key or
    join column's new type stops it under any policy (the state joins rows by their rendered
    values); otherwise it is said once, as an error naming `cdckit rebuild all`. The catalog is
    read before every batch: a join column's new type must stop the query before it folds."""

    def __init__(self, config: Config, resolved: ResolvedDocuments):
        self.config, self.resolved = config, resolved
        self.policy = {t.name: t.on_schema_change for t in config.tables}
        self.joined = resolved.joined()
        self.stopping = any(self.policy.get(t) == "stop" for t in resolved.types)
        self.told: set[str] = set()

    def check(self) -> None:
        from connectors import postgres
        from pipelines.errors import SchemaChangeError

        try:
            with postgres.connect(self.config.postgres.dsn_kwargs()) as conn:
                current = {t: postgres.column_types(conn, t) for t in self.resolved.types}
        except Exception as exc:  # noqa: BLE001 - Postgres not answering: the next batch checks
            if self.stopping:
                from derived.sinks.store_errors import StoreUnavailable

                # `stop` promises no batch of a new shape: unchecked, the batch waits (a restart).
                raise StoreUnavailable(f"postgres: the documents' schema check did not read the catalog: "
                                       f"{type(exc).__name__}: {str(exc)[:200]}") from exc
            log.warning("documents: schema check skipped: %s: %s", type(exc).__name__, str(exc)[:200])
            return
        for table, changes in self.resolved.drift(current).items():
            what = f"{table}: {'; '.join(f'column {c} {how}' for c, how in changes)}"
            if self.policy.get(table) == "stop":
                raise SchemaChangeError(
                    f"{what}. on_schema_change is 'stop': the job stopped before the documents folded changes "
                    f"of the new shape. Run `cdckit snapshot resync {table}` (re-reads every row), then "
                    "`cdckit rebuild all` (the documents are rendered anew), or set on_schema_change: evolve")
            keyed = [c for c, _ in changes if c in self.joined.get(table, set())]
            if keyed:   # the state joins rows by these columns' rendered values: they would stop matching
                raise SchemaChangeError(
                    f"{what}: the documents join rows by {', '.join(keyed)}, so their state no longer "
                    "fits; run `cdckit rebuild all` (it builds the documents anew), then start the job again")
            if what not in self.told:
                self.told.add(what)
                log.error("documents: %s: documents holding this table keep its old rendering until "
                          "`cdckit rebuild all` (run it once the table's re-read is done)", what)


class PausedForHandover(RuntimeError):
    """A live documents' batch given up, unwritten and uncommitted, because its query is stopping."""


def start(spark, config: Config, config_json: bytes, resolved: ResolvedDocuments, folder: Path,
          targets: Targets | None = None, available_now: bool = False, totals: dict[str, int] | None = None,
          stopping: threading.Event | None = None, written: Callable[[], None] | None = None):
    """The documents' query from the state in `folder`: the live one, or (given `targets`) a
    rebuild's, writing its fresh generations alone, to the log's end (`available_now`).
    `totals` sums records and documents over its batches; `stopping` set lets a batch that waits
    for a hand-over give up (the query is being stopped); `written()` after a batch that wrote
    the search indexes."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    check_state_matches(config, resolved, folder)
    live = targets is None
    ckpt = config.spark.checkpoint_dir
    totals = totals if totals is not None else {}

    drift = ColumnDrift(config, resolved) if live else None

    def write(df, batch_id: int) -> None:
        started = time.monotonic()
        waited = started
        if drift is not None:
            drift.check()
        checked_s = time.monotonic() - started
        moved = None
        while True:
            with ExitStack() as held:
                if live:
                    # A rebuild switches (and hands its documents' state over, or carries the documents
                    # into its database) holding this lock (pipelines/state/documents_state.py); uncontended
                    # otherwise. Taken always: a batch that began before a rebuild may outlast its replay.
                    held.enter_context(documents_state.handover_lock(ckpt))
                if live and documents_state.current(ckpt) != folder:
                    # Not written, and not returned either: a batch that returns without running its
                    # frame leaves the state store uncommitted, which Spark fails the query for
                    # (STATE_STORE_COMMIT_VALIDATION_FAILED), maybe before tend() moves it. It waits
                    # for that stop and gives up like a batch waiting for a hand-over.
                    if moved is None:
                        moved = documents_state.current(ckpt).name
                        log.info("documents batch %d not written: a rebuild's state (%s) took over; this query "
                                 "moves there", batch_id, moved)
                elif not live or documents_state.pending(ckpt) is None:
                    # Live: the fold's own task writes (fold_fn), its figures are the rows; a rebuild's
                    # large batches are written by as many tasks as cores.
                    if live:
                        rows = [_written_row(r["stats"]) for r in df.select("stats").toArrow().to_pylist()]
                    else:
                        out = df.repartition(spark.sparkContext.defaultParallelism)
                        rows = out.mapInArrow(write_fn(config_json, targets), _ddl(WRITE_STATS)).toArrow().to_pylist()
                    break
            if stopping is not None and stopping.is_set():
                # Not committed: the batch runs again after the hand-over, or after its cancel (or, moved,
                # never: the next query runs from the rebuild's state). Raised once stop() has marked the
                # query stopped (it does at once), so Spark counts the error as the stop.
                time.sleep(0.5)
                raise PausedForHandover(stopped_on_purpose(
                    f"documents batch {batch_id} stopped while waiting for a rebuild's hand-over to "
                    f"{moved or documents_state.pending(ckpt)}"))
            if moved is not None:
                time.sleep(0.1)   # tend() stops this query within a poll of the job
                continue
            if time.monotonic() - waited > 30:
                waited = time.monotonic()
                log.warning("documents batch %d waits for a rebuild's hand-over to %s (its process stopped "
                            "mid-way? rerun `cdckit rebuild all`)", batch_id, documents_state.pending(ckpt))
            time.sleep(0.5)
        if written is not None and any(r["search_applied"] for r in rows):
            written()
        folds = [f for r in rows for f in orjson.loads(r["fold"])]
        holding: dict[str, dict[str, int]] = {}
        for f in folds:
            for topic, parts in (f.get("holding") or {}).items():
                mine = holding.setdefault(topic, {})
                for p, o in parts.items():
                    mine[p] = min(mine.get(p, o), o)
        documents_state.save_held(folder, holding)   # before Spark commits the batch (see save_held)
        waiting = sum(f.get("held", 0) for f in folds)
        late = sum(f.get("late", 0) for f in folds)
        if late:
            example = next((f["late_example"] for f in folds if f.get("late_example")), "")
            log.warning("documents batch %d: %d transaction(s) folded incomplete after waiting %d s of record "
                        "time for the rest (compacted away, or their END record lost); %s", batch_id, late,
                        LATE_MS // 1000, example)
        total = {k: sum(r[k] for r in rows) for k in WRITE_STATS.names[:-2]}
        records = sum(f["records"] for f in folds)
        totals["records"] = totals.get("records", 0) + records
        totals["documents"] = totals.get("documents", 0) + total["documents"]
        totals["dead_letters"] = totals.get("dead_letters", 0) + total["dead_letters"]
        fan_out = sum(f["fan_out_documents"] for f in folds)
        undecodable = sum(f["dead"] for f in folds)
        spent = {k: sum(f["timings"].get(k, 0.0) for f in folds) for k in ("load_s", "rows_s", "fold_s", "save_s")}
        state_mb = sum(f["timings"]["state_bytes"] for f in folds) / 1e6
        cpu_s = sum(f["timings"].get("cpu_s", 0.0) for f in folds)
        stores_s = sum(r["stores_s"] for r in rows)
        kept = sum(1 for f in folds if f["timings"].get("kept"))
        log.info("%sdocuments batch %d: %s records, %s documents (%s by shared rows), search %s applied/%s stale, "
                 "cache %s applied/%s stale%s, %.2f s (fold %.2f s: state load %.2f, rows %.2f, fold %.2f, save %.2f; "
                 "stores %.2f s; schema check %.2f s; state %.1f MB, kept by the worker for %d of %d; "
                 "fold task's CPU %.2f s)", "" if live else "rebuild: ",
                 batch_id, f"{records:,}", f"{total['documents']:,}", f"{fan_out:,}",
                 f"{total['search_applied']:,}", f"{total['search_stale']:,}", f"{total['cache_applied']:,}",
                 f"{total['cache_stale']:,}",
                 (f", {total['dead_letters']} DEAD LETTERS" if total["dead_letters"] else "")
                 + (f", {waiting:,} held for their transactions" if waiting else "")
                 + (f", {undecodable} undecodable (dead-lettered by the tables' query)" if undecodable else ""),
                 time.monotonic() - started, sum(spent.values()), spent["load_s"], spent["rows_s"], spent["fold_s"],
                 spent["save_s"], stores_s, checked_s, state_mb, kept, len(folds), cpu_s)

    # One state partition per document: the session is built with it (session.shuffle_partitions).
    by_document = stream(spark, config).groupBy("document")
    with _own_worker_pool(spark.sparkContext):
        grouped = by_document.applyInPandasWithState(
            fold_fn(config_json, resolved, writes=live), OUT_DDL, STATE_DDL, "append", GroupStateTimeout.NoTimeout)
    writer = (grouped.writeStream.foreachBatch(compact_interruptions(write))
              .option("checkpointLocation", str(folder / "query")))
    if available_now or config.spark.trigger == "available_now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=config.spark.trigger)
    return writer.queryName("cdckit-documents" if live else "cdckit-rebuild-documents").start()


POOL_VARIABLE = "CDCKIT_PYTHON_POOL"


@contextmanager
def _own_worker_pool(sc) -> Iterator[None]:
    """The functions made inside run in Python workers of their own: Spark keeps a pool of workers
    per Python executable and environment, and a function takes the context's environment when it is
    made. So the fold's tasks reach the worker that kept the document's state (saved_state.py), not
    one the tables' or the read's tasks used last (measured: every fold task of a run in one worker).
    The dict is replaced, not edited: the tables' query makes a function per batch on another thread,
    copying the environment as it does (an edit under that copy would fail its batch)."""
    before = sc.environment
    sc.environment = {**before, POOL_VARIABLE: "documents-fold"}
    try:
        yield
    finally:
        sc.environment = before


class LiveDocuments:
    """The running job's documents' query; moved to a rebuild's state once the rebuild has
    switched to the generations that state built (`tend`, called between the job's polls)."""

    def __init__(self, spark, config: Config, config_json: bytes, resolved: ResolvedDocuments,
                 written: Callable[[], None] | None = None):
        self.spark, self.config, self.config_json, self.resolved = spark, config, config_json, resolved
        self.written = written
        self.folder = checkpoint(config)
        self._remove_stale()
        self.stopping = threading.Event()
        self.query = start(spark, config, config_json, resolved, self.folder, stopping=self.stopping, written=written)

    def tend(self) -> None:
        from pipelines.documents.snapshot_sweep import sweep_documents_when_applied

        try:   # after a re-snapshot: deleted roots' documents (the marker stays until it is done)
            sweep_documents_when_applied(self.config)
        except Exception as exc:  # noqa: BLE001 - a store or the broker not answering: next poll
            log.warning("documents: the re-snapshot's sweep not done yet: %s: %s", type(exc).__name__,
                        str(exc)[:200])
        now = checkpoint(self.config)
        if now == self.folder:
            return
        log.info("documents: the rebuild's state in %s takes over from %s", now.name, self.folder.name)
        self.stop()
        self.stopping.clear()
        self.folder = now
        if not state_matches(self.config, self.resolved, now):
            raise ConfigError("documents", f"the rebuild built the documents' state in {now.name} for another "
                              "`documents:` section than this job's: restart `cdckit run` with that config")
        self.query = start(self.spark, self.config, self.config_json, self.resolved, now, stopping=self.stopping,
                           written=self.written)
        self._remove_stale()

    def _remove_stale(self) -> None:
        ckpt = self.config.spark.checkpoint_dir
        state = rebuild_state.load(ckpt)
        keep = {self.folder}
        if state is not None and state.plan.get("documents"):
            keep.add(ckpt / str(state.plan["documents"]["folder"]))
        for gone in documents_state.remove_stale(ckpt, keep):
            log.info("documents: the replaced state %s removed", gone.name)

    @property
    def isActive(self) -> bool:  # noqa: N802 - StreamingQuery's spelling
        return self.query.isActive

    @property
    def lastProgress(self):  # noqa: N802
        return self.query.lastProgress

    def awaitTermination(self, timeout: float | None = None):  # noqa: N802
        return self.query.awaitTermination(timeout)

    def exception(self):
        failure = self.query.exception()
        if failure is not None and self.stopping.is_set() and "PausedForHandover" in str(failure):
            return None   # stopped on purpose while it waited
        return failure

    def stop(self) -> None:
        self.stopping.set()
        self.query.stop()


def _ddl(schema: pa.Schema) -> str:
    from pipelines.spark.schemas import ddl

    return ddl(schema)
