"""`cdckit snapshot add SCHEMA.TABLE`: add a table to a running pipeline with Debezium's incremental
snapshot (a signal row), while the other tables keep streaming.

The table must already be in the config: the running job re-reads its config file and subscribes
by topic pattern, so it picks the new table up without a restart.
"""
from __future__ import annotations

import time
from typing import Callable

from connectors import postgres
from pipelines.ops import connector_admin
from pipelines.state.schema import SchemaState
from pipelines.state.query_offsets import applied_offsets
from pipelines.config import Config
from pipelines.errors import ConfigError


def _windows(config: Config) -> int:
    with postgres.connect(config.postgres.dsn_kwargs()) as conn:
        return postgres.snapshot_windows(conn, config.postgres.signal_table)


def _completed(config: Config, signal_id: str) -> bool:
    from connectors.kafka.notifications import completed_snapshots

    try:
        return signal_id in completed_snapshots(config.kafka.client_config(), config.notification_topic)
    except Exception:  # noqa: BLE001 - the broker not answering: the windows decide
        return False


def add_table(config: Config, table_name: str, on_progress: Callable[[int, int], None] = lambda done, total: None,
              timeout_s: float = 3600) -> dict:
    table = next((t for t in config.tables if t.name == table_name), None)
    if table is None:
        raise ConfigError("tables", f"{table_name} is not in the config: add it under tables: first "
                                    f"(the running job picks the change up by itself)")
    if table.documents_only:
        raise ConfigError("tables", f"{table_name} is read only by documents (no store of its own): a document "
                                    "added to a running pipeline is built by `cdckit rebuild all`")
    totals = prepare(config)
    before = _walsender(config)
    if connector_admin.apply(config).action != "unchanged":
        # A signal the old task reads is dropped (it does not capture the table): wait for the
        # restarted task, which shows as a new walsender on the slot.
        _wait(lambda: _healthy(config) and _walsender(config) not in (None, before), 120,
              f"connector {config.connector_name} to restart with the new table")
    _wait(lambda: _healthy(config) and _walsender(config) is not None, 120,
          f"connector {config.connector_name} to stream")
    baseline = _windows(config)
    signal_id = _signal(config, table_name)
    try:
        _wait(lambda: _windows(config) > baseline, 30, "the incremental snapshot to start")
    except TimeoutError:
        signal_id = _signal(config, table_name)  # e.g. read by a task that was stopping: once more
    from pipelines.apply.stores import stores_from_config

    stores = stores_from_config(config)
    started = time.monotonic()
    total = totals[table_name]
    windows, changed_at, target, completed_at = _windows(config), time.monotonic(), None, None
    while time.monotonic() - started < timeout_s:
        on_progress(min(_applied_count(stores, table), total), total)
        now_windows = _windows(config)
        if now_windows != windows:
            windows, changed_at = now_windows, time.monotonic()
        quiet = time.monotonic() - changed_at
        # Debezium's COMPLETED notification of this signal ends it; without one (the channel off, an
        # older Debezium), 10 s without a new snapshot window. The rows and the notification go to
        # other partitions through one producer: their acknowledgements may come in either order,
        # so the topic's ends are taken 2 s after the notification is seen.
        if completed_at is None and _completed(config, signal_id):
            completed_at = time.monotonic()
        if target is None and ((completed_at is not None and time.monotonic() - completed_at >= 2)
                               or (windows > baseline and quiet > 10) or (windows == baseline and quiet > 30)):
            # The snapshot has emitted everything: the job must apply up to here.
            target = _end_offsets(config, config.topic_for(table))
        if target is not None:
            committed = (applied_offsets(config.spark.checkpoint_dir) or {}).get(config.topic_for(table), {})
            if all(int(committed.get(p, 0)) >= o for p, o in target.items()):
                applied = _applied_count(stores, table)
                on_progress(min(applied, total), total)
                _settle_schema_work(config, table_name)
                return {"signal_id": signal_id, "rows": total, "in_store": applied,
                        "seconds": round(time.monotonic() - started, 1)}
        time.sleep(1)
    raise TimeoutError(f"incremental snapshot of {table_name} did not finish within {timeout_s:g} s")


def _settle_schema_work(config: Config, table_name: str) -> None:
    """Every row re-read: schema work that waited for it (a stop, or a re-read) is done."""
    from pipelines.state.schema import SchemaState

    state = SchemaState(config.spark.checkpoint_dir)
    with state.editing():   # the running job's watch edits it too
        pending = state.pending()
        left = [w for w in pending if w.table != table_name or (w.rebuild and not w.stopped)]
        if left != pending:
            state.save_pending(left)


def _end_offsets(config: Config, topic: str) -> dict[str, int]:
    from connectors.kafka.offsets import end_offsets

    return {p: int(o) for p, o in end_offsets(config.kafka.client_config(), [topic]).get(topic, {}).items()}


def _signal(config: Config, table_name: str) -> str:
    with postgres.connect(config.postgres.dsn_kwargs()) as conn:
        return postgres.request_incremental_snapshot(conn, config.postgres.signal_table, table_name)


def _walsender(config: Config) -> int | None:
    with postgres.connect(config.postgres.dsn_kwargs()) as conn:
        info = postgres.slot_info(conn, config.postgres.slot)
    return info.active_pid if info is not None and info.active else None


def _wait(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(0.5)


def _healthy(config: Config) -> bool:
    st = connector_admin.status(config)
    return st is not None and st.healthy


def _applied_count(stores, table) -> int:
    if hasattr(stores.cache, "count"):
        return stores.cache.count(stores.cache_tables[table.name])
    return stores.search.engine.count(stores.search_tables[table.name].alias)


def prepare(config: Config) -> dict[str, int]:
    """Support tables and publication, the tables' shapes before their snapshot (the schema
    watch's first sight); returns each table's row count (progress totals)."""
    pg = config.postgres
    with postgres.connect(pg.dsn_kwargs()) as conn:
        postgres.ensure_support_tables(conn, pg.heartbeat_table, pg.signal_table, pg.truncate_table,
                                       [t.name for t in config.tables])
        postgres.ensure_publication(conn, pg.publication, [t.name for t in config.tables]
                                    + [pg.signal_table, pg.heartbeat_table, pg.truncate_table])
        SchemaState(config.spark.checkpoint_dir).first_sight(
            {t.name: postgres.table_columns(conn, t.name) for t in config.tables})
        return {t.name: conn.execute(f"SELECT count(*) FROM {t.name}").fetchone()[0] for t in config.tables}
