"""`cdckit status`: what is true right now, from each system's own answer, with warnings and an
overall verdict (the exit code)."""
from __future__ import annotations

import socket
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from pipelines.config import Config
from pipelines.status_rules import far_below, letter_problem, pending_by_table, shortfall_problem

LAG_GROWTH_SAMPLE_S = 2.0


@dataclass
class Report:
    healthy: bool = True
    warnings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    connector: dict[str, Any] | None = None
    slot: dict[str, Any] | None = None
    topics: dict[str, dict[str, Any]] = field(default_factory=dict)
    pipeline: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    stores_lost: list[str] = field(default_factory=list)
    schema_pending: list[str] = field(default_factory=list)
    dead_letters: dict[str, Any] = field(default_factory=dict)

    def problem(self, text: str) -> None:
        self.problems.append(text)
        self.healthy = False

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _connector(config: Config, report: Report) -> None:
    from connectors.connect_client import ConnectError
    from pipelines.ops.connector_admin import client_for, status

    try:
        st = status(config)
        stored = client_for(config).get_config(config.connector_name) or {}
    except ConnectError as exc:
        report.problem(f"Kafka Connect: {exc}")
        return
    if st is None:
        report.connector = {"name": config.connector_name, "state": "MISSING", "tasks": []}
        report.problem(f"connector {config.connector_name} is not registered: `cdckit connector apply` (or "
                       "`cdckit bootstrap`) registers it")
        return
    report.connector = {"name": st.name, "state": st.state, "tasks": [
        {"id": t.id, "state": t.state, "trace": (t.trace or "").splitlines()[0] if t.trace else None}
        for t in st.tasks]}
    if not st.healthy:
        states = ", ".join(f"task {t.id} {t.state}" for t in st.tasks) or "no tasks"
        report.problem(f"connector {st.name} is {st.state} ({states}): `cdckit connector status` shows the "
                       "trace; once its cause is fixed, `cdckit connector restart`")
    if int(stored.get("heartbeat.interval.ms", "0") or 0) <= 0:
        report.warnings.append("Debezium heartbeats are off: an idle database's WAL will pile up behind the slot")


def _slot(config: Config, report: Report) -> None:
    from connectors import postgres

    try:
        with postgres.connect(config.postgres.reader_dsn_kwargs()) as conn:
            info = postgres.slot_info(conn, config.postgres.slot)
            current = postgres.current_wal_lsn(conn)
            for t in config.tables:
                est = conn.execute("SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(%s)",
                                   (t.name,)).fetchone()
                if est is not None and est[0] < 0:  # never analyzed: no estimate, so count
                    est = conn.execute(f"SELECT count(*) FROM {t.name}").fetchone()
                report.tables.setdefault(t.name, {})["postgres_rows_estimate"] = est[0] if est else None
                if t.documents_only:   # no store of its own: read by the documents alone
                    report.tables[t.name]["documents_only"] = True
    except postgres.PostgresUnreachable as exc:
        report.problem(str(exc))
        return
    if info is None:
        report.slot = {"name": config.postgres.slot, "exists": False}
        report.problem(f"replication slot {config.postgres.slot} does not exist: `cdckit connector restart` "
                       "creates it; changes made before that are not in the topics, so `cdckit verify` "
                       "afterwards")
        return
    lag = current - info.confirmed_flush_lsn if info.confirmed_flush_lsn else None
    report.slot = {"name": info.name, "exists": True, "active": info.active, "lag_bytes": lag,
                   "wal_retained_bytes": info.retained_bytes}
    if not info.active:
        report.problem(f"replication slot {info.name} is inactive: nothing reads the WAL, which piles up "
                       f"({info.retained_bytes or 0:,} bytes retained)")


def _topics(config: Config, report: Report) -> None:
    from connectors.kafka.clients import topic_names, topic_setting
    from connectors.kafka.offsets import end_offsets
    from pipelines.state.query_offsets import applied_offsets

    conf = config.kafka.client_config()
    try:
        existing = topic_names(conf)
    except Exception as exc:  # noqa: BLE001 - KafkaException: broker unreachable
        report.problem(f"Kafka at {config.kafka.bootstrap_servers}: {exc}")
        return
    topics = [config.topic_for(t) for t in config.tables if config.topic_for(t) in existing]

    def lags() -> tuple[dict[str, int], dict[str, dict[str, int]], dict[str, dict[str, int]]]:
        committed = applied_offsets(config.spark.checkpoint_dir) or {}
        end = end_offsets(conf, topics) if topics else {}
        return {t: sum(max(0, int(o) - int(committed.get(t, {}).get(p, 0))) for p, o in parts.items())
                for t, parts in end.items()}, end, committed

    first, first_end, first_committed = lags()
    time.sleep(LAG_GROWTH_SAMPLE_S)
    second, end, committed = lags()
    for t in config.tables:
        topic = config.topic_for(t)
        info: dict[str, Any] = {"exists": topic in existing}
        report.topics[topic] = info
        if topic not in existing:
            report.problem(f"topic {topic} does not exist (connector not started: `cdckit bootstrap`; or the "
                           "broker lost it: `cdckit bootstrap` re-snapshots)")
            continue
        info["cleanup_policy"] = topic_setting(conf, topic, "cleanup.policy")
        info["end_offsets"] = end.get(topic, {})
        info["committed_offsets"] = committed.get(topic)
        info["lag"] = second.get(topic, 0)
        info["lag_growing"] = lag_growing(first.get(topic, 0), second.get(topic, 0), first_end.get(topic, {}),
                                          first_committed.get(topic) or {}, committed.get(topic) or {})
        if "compact" not in info["cleanup_policy"]:
            report.warnings.append(f"topic {topic} is not compacted (cleanup.policy={info['cleanup_policy']}): "
                                   "a replay from offset 0 cannot rebuild the stores once data expires")
        if info["lag_growing"]:
            report.problem(f"pipeline lag on {topic} is growing ({first.get(topic, 0)} -> {second.get(topic, 0)})")


def lag_growing(first: int, second: int, end_at_first: dict[str, int], committed_at_first: dict[str, int],
                committed_at_second: dict[str, int]) -> bool:
    """Whether a topic's lag grows: larger at the second sample, and either nothing was committed
    between the samples or the pipeline has not even reached where the topic ended at the first.
    Lag alone swings with the commits (a batch every 0.5-1 s, spaced under load:
    pipelines/streaming/batch_cadence.py), so two samples of a healthy pipeline under steady load
    often differ either way; one that keeps up commits past the first sample's ends within the
    sample's seconds."""
    if second <= first:
        return False
    if committed_at_second == committed_at_first:
        return True
    return any(int(committed_at_second.get(p, 0)) < int(o) for p, o in end_at_first.items())


def _pipeline(config: Config, report: Report) -> None:
    from pipelines.state.bootstrap_state import handover
    from pipelines.state.status_file import pipeline_running, process_alive, read_status

    st = read_status(config.spark.checkpoint_dir)
    running = pipeline_running(config.spark.checkpoint_dir)  # its heartbeat, seen from any host
    if st is None:
        report.pipeline = {"running": bool(running), "batches": 0}
        if running:
            report.warnings.append("the pipeline runs but has not applied a batch yet (starting, or no change "
                                   "arrived since it started)")
        elif handover(config.spark.checkpoint_dir) is not None:   # `bootstrap --once` applied it in bulk
            report.problem("the snapshot is applied (by the bootstrap's bulk) and the pipeline is not running: "
                           "start it with `cdckit run`")
        else:
            report.problem("the pipeline has not applied any batch yet (is `cdckit run` running?)")
        return
    age = time.time() - st["finished_at"]
    if running is None:  # a checkpoint from before heartbeats: only a process on this host can be judged
        running = st.get("host") != socket.gethostname() or process_alive(st.get("pid"))
    if not running:
        report.problem(f"the pipeline process that applied the last batch (pid {st.get('pid')} on "
                       f"{st.get('host')}) is not running: start it with `cdckit run`")
    if config.documents:
        from pipelines.state import documents_state
        handover = documents_state.pending(config.spark.checkpoint_dir)
        if handover is not None:
            report.warnings.append(f"the documents' batches wait for a rebuild to hand its state ({handover}) over: "
                                   "seconds while a rebuild switches; if none runs, `cdckit rebuild all` completes it")
    report.pipeline = {"running": running, "last_batch_id": st["batch_id"], "last_batch_age_s": round(age, 1),
                       "newest_change_age_s": round(time.time() - st["newest_source_ts_ms"] / 1000, 1)
                       if st.get("newest_source_ts_ms") else None,
                       "last_batch_records": st["records"], "dead_letters_last_batch": st["dead_letters"]}


def _schema(config: Config, report: Report) -> None:
    """Schema work the job started and has not finished (pipelines/schema/column_watch.py)."""
    from pipelines.state.schema import SchemaState

    for work in SchemaState(config.spark.checkpoint_dir).pending():
        line = work.line()
        report.schema_pending.append(line)
        report.warnings.append(f"schema change: {line}")


def _stores(config: Config, report: Report, exact: bool) -> None:
    from pipelines.apply.stores import stores_from_config

    stores = stores_from_config(config)
    _lost(config, stores, report)
    # Tables, then nested documents (by their store name, counted against their root table's rows).
    for name, rows_of in [(t.name, t.name) for t in config.flat_tables] + [(d.store_table, d.root)
                                                                      for d in config.documents]:
        row = report.tables.setdefault(name, {})
        if name != rows_of and rows_of in report.tables:
            row.setdefault("postgres_rows_estimate", report.tables[rows_of].get("postgres_rows_estimate"))
        if "search" in config.sinks:
            search_table = stores.search_tables[name]
            try:
                row["search_docs"] = stores.search.count(search_table)   # no refresh: status only reads
                if row["search_docs"] is None:
                    report.problem(f"search index {search_table.alias} is missing (store lost its data? "
                                   f"run `cdckit rebuild search`)")
            except Exception as exc:  # noqa: BLE001 - connection errors of either client library
                report.problem(f"search at {config.search.url}: {type(exc).__name__}")
        if "cache" in config.sinks:
            try:
                row["cache_keys"] = stores.cache.count(stores.cache_tables[name], exact=exact)
            except Exception as exc:  # noqa: BLE001 - redis connection errors
                report.problem(f"redis at {config.redis.url}: {type(exc).__name__}")
        if exact:
            from connectors import postgres

            with postgres.connect(config.postgres.reader_dsn_kwargs()) as conn:
                row["postgres_rows"] = conn.execute(f"SELECT count(*) FROM {rows_of}").fetchone()[0]
        table = next((t for t in config.tables if t.name == name), None)
        if table is not None and table.filtered:
            _filtered_shortfalls(config, report, table, row)
        else:
            _shortfalls(config, report, name, rows_of, row)


def _filtered_shortfalls(config: Config, report: Report, table, row: dict[str, Any]) -> None:
    """A filtered table's stores are held against the rows their filters keep, counted exactly
    (derived/row_filter.store_sql), and only when a store is far below the table's estimate."""
    from connectors import postgres
    from connectors.row_filter import store_sql

    for store, sink in (("search_docs", "search"), ("cache_keys", "cache")):
        if sink not in config.sinks or not far_below(row.get(store), row.get("postgres_rows_estimate") or 0):
            continue
        try:
            with postgres.connect(config.postgres.reader_dsn_kwargs()) as conn:
                where = store_sql(*table.row_filter(sink), postgres.column_types(conn, table.name))
                kept = conn.execute(f"SELECT count(*) FROM {table.name}" + (f" WHERE {where}" if where else "")
                                    ).fetchone()[0]
        except postgres.PostgresUnreachable:
            continue
        except Exception as exc:  # noqa: BLE001 - a filter the table no longer fits (a column dropped, ...)
            report.problem(f"{table.name}: its row filter cannot be counted in Postgres ({type(exc).__name__}: "
                           f"{str(exc).splitlines()[0][:160]}): `cdckit config check` names the mistake")
            continue
        row[f"postgres_rows_kept_{sink}"] = kept
        if far_below(row.get(store), kept):
            report.problem(shortfall_problem(table.name, store, row[store], kept, True) + " (its row filter kept)")


def _shortfalls(config: Config, report: Report, name: str, rows_of: str, row: dict[str, Any]) -> None:
    """A store far below Postgres (status_rules.far_below) is a problem: records refused, or lost.
    Below the estimate, the rows are counted exactly first: reltuples lags a large DELETE until
    the next ANALYZE, and the exact count is what the problem line then names."""
    stores = ("search_docs", "cache_keys")
    if "postgres_rows" not in row and any(far_below(row.get(s), row.get("postgres_rows_estimate")) for s in stores):
        from connectors import postgres

        try:
            with postgres.connect(config.postgres.reader_dsn_kwargs()) as conn:
                row["postgres_rows"] = conn.execute(f"SELECT count(*) FROM {rows_of}").fetchone()[0]
        except postgres.PostgresUnreachable:
            pass  # reported by the slot's part already
    exact = "postgres_rows" in row
    want = row.get("postgres_rows", row.get("postgres_rows_estimate"))
    for store in stores:
        if far_below(row.get(store), want):
            report.problem(shortfall_problem(name, store, row[store], want, exact))
        elif row.get(store) == 0 and want:
            report.warnings.append(f"{name}: {store.replace('_', ' ')} is empty but Postgres has ~{want} rows")


def _dead_letters(config: Config, report: Report) -> None:
    """Letters past the mark `cdckit dlq replay` left (pipelines/state/letters_settled.py), per table."""
    from connectors.kafka.dead_letter_topic import tally_letters, topic_end
    from pipelines.state.letters_settled import pending_from, settled_offset

    conf = config.kafka.client_config()
    try:
        end = topic_end(conf, config.dead_letter_topic)
        start = pending_from(settled_offset(config.spark.checkpoint_dir), end)
        tally = tally_letters(conf, config.dead_letter_topic, start, end) if end > start else None
    except Exception as exc:  # noqa: BLE001 - KafkaException, authorization: status goes on, saying so
        report.warnings.append(f"dead letters not counted: {type(exc).__name__}: {str(exc)[:160]}")
        return
    report.dead_letters = {"topic": config.dead_letter_topic, "end": end, "settled_below": start,
                           "pending": tally.total if tally else 0}
    if tally is None:
        return
    pending = pending_by_table(tally.per_topic, tally.first_reason,
                               lambda topic: getattr(config.table_for_topic(topic), "name", None))
    for name, (count, reason) in sorted(pending.items()):
        report.tables.setdefault(name, {})["dead_letters_pending"] = count
        report.problem(letter_problem(name, count, reason))
    if tally.read < tally.total:
        report.problem(f"{tally.total:,} dead letters not settled in all ({tally.read:,} read for the tables above)")


def _rebuild(config: Config, report: Report) -> None:
    """The last rebuild refused its switch over dead letters: said, since its generation is gone."""
    from pipelines.state import rebuild_state
    state = rebuild_state.load(config.spark.checkpoint_dir)
    verdict = (state.dead_letters or {}) if state is not None else {}
    if state is not None and state.phase == "done" and verdict and not verdict.get("switch"):
        report.warnings.append(f"rebuild {state.plan.get('rebuild_id')} did not switch: {verdict.get('count', 0):,} "
                               "records of its replay were dead-lettered (its fresh generation was dropped); "
                               "`cdckit dlq list`, fix the cause, rebuild again")


def _lost(config: Config, stores, report: Report) -> None:
    from derived.sinks import markers as store_markers
    from pipelines.state.query_offsets import applied_offsets

    if applied_offsets(config.spark.checkpoint_dir) is None:
        return  # the pipeline never ran: nothing was there to lose
    try:
        gone = [name for name, sink in stores.by_name(config.sinks).items() if not sink.marked(config.topic_prefix)]
    except Exception:  # noqa: BLE001 - unreachable stores are reported below
        return
    if gone:
        report.stores_lost = gone
        report.problem(store_markers.lost_message(gone, {"search": config.search.url, "cache": config.redis.url}))


def _index_definitions(config: Config, report: Report, compare=None) -> None:
    """A live index that differs from the config's definition (a setting or mapping edited, a
    column retyped): only a rebuild applies it. Not reading the catalog or the engine skips this
    with a note; a missing index is reported by the store counts."""
    if "search" not in config.sinks:
        return
    if compare is None:
        from pipelines.ops.index_comparison import compare
    try:
        comparisons = compare(config)
    except Exception as exc:  # noqa: BLE001 - Postgres or the engine not answering: status goes on
        report.warnings.append(f"index definitions not compared: {type(exc).__name__}: {str(exc)[:160]}")
        return
    for c in comparisons:
        if c.index is None or not c.differences:
            continue
        report.tables.setdefault(c.table, {})["index_differences"] = c.differences
        report.warnings.append(f"{c.table}: index {c.index} differs from the config's definition "
                               f"({len(c.differences)}: {c.differences[0]}"
                               f"{'; ...' if len(c.differences) > 1 else ''}): run `cdckit rebuild search --table "
                               f"{c.table}` (`cdckit index show {c.table}` lists them)")


def collect(config: Config, exact: bool = False) -> Report:
    report = Report()
    for part in (_connector, _slot, _topics, _pipeline, _schema, _rebuild):
        part(config, report)
    _stores(config, report, exact)
    _dead_letters(config, report)
    _index_definitions(config, report)
    return report
