"""Prometheus metrics served by the running pipeline (`metrics_port`, 0 turns them off)."""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Iterable

log = logging.getLogger("cdckit.metrics")

TASK_STATES = ("RUNNING", "FAILED", "PAUSED", "UNASSIGNED")


class PipelineMetrics:
    def __init__(self, port: int, host: str = "127.0.0.1", sinks: tuple[str, ...] = ("search", "cache")):
        """`port` 0: the metrics are kept but not served (tests read `registry`). `sinks`: the stores
        the pipeline writes (`/visible` refuses a store it does not)."""
        self.sinks = tuple(sinks)
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        r = self.registry
        self.applied = Counter("cdckit_events_applied", "changes written to a store", ["store"], registry=r)
        self.stale = Counter("cdckit_events_stale", "changes a store already had newer", ["store"], registry=r)
        self.records = Counter("cdckit_records", "Kafka records read", registry=r)
        self.dead = Counter("cdckit_dead_letters", "records sent to the dead-letter topic", registry=r)
        self.batch_seconds = Histogram("cdckit_batch_duration_seconds", "micro-batch duration", registry=r,
                                       buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120))
        self.freshness = Gauge("cdckit_freshness_seconds", "age of the newest applied change at apply time",
                               registry=r)
        self.visible = Histogram("cdckit_change_visible_seconds", "commit in Postgres to applied in the stores "
                                 "(sampled streamed changes)", registry=r,
                                 buckets=(0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 2.5, 3, 4, 5, 7.5, 10, 15, 30, 60))
        self.lag = Gauge("cdckit_lag_records", "records behind the end of each topic", ["topic"], registry=r)
        self.last_batch = Gauge("cdckit_last_batch_timestamp_seconds", "when the last batch finished",
                                registry=r)
        # Per table, from the batch's per-partition stats rows.
        self.table_records = Counter("cdckit_table_records", "Kafka records read per table", ["table"], registry=r)
        self.table_dead = Counter("cdckit_table_dead_letters", "dead letters per table", ["table"], registry=r)
        self.table_freshness = Gauge("cdckit_table_freshness_seconds",
                                     "age of the table's newest applied change at apply time", ["table"], registry=r)
        # The source side, polled by pipelines/spark/source_health.py (0 also when a poll fails).
        self.slot_lag = Gauge("cdckit_slot_lag_bytes", "WAL between the database's position and the slot's "
                              "confirmed position (NaN: unknown)", registry=r)
        self.slot_retained = Gauge("cdckit_slot_retained_bytes", "WAL the slot keeps (NaN: unknown)", registry=r)
        self.slot_active = Gauge("cdckit_slot_active", "1 when a client reads the replication slot", registry=r)
        self.connector_running = Gauge("cdckit_connector_running", "1 when the Debezium connector is RUNNING",
                                       registry=r)
        self.connector_tasks = Gauge("cdckit_connector_tasks", "connector tasks per state", ["state"], registry=r)
        # Long work in progress: the bootstrap's snapshot and a rebuild (its state beside the checkpoint).
        self.snapshot_read = Gauge("cdckit_snapshot_rows_read", "snapshot rows applied", ["table"], registry=r)
        self.snapshot_total = Gauge("cdckit_snapshot_rows_total", "rows to snapshot (counted at its start)",
                                    ["table"], registry=r)
        self.rebuild_active = Gauge("cdckit_rebuild_active", "1 while a rebuild is unfinished", registry=r)
        self.rebuild_done = Gauge("cdckit_rebuild_records_done", "records the rebuild's bulk replay has read",
                                  registry=r)
        self.rebuild_total = Gauge("cdckit_rebuild_records_total", "records the rebuild's bulk replays", registry=r)
        # What `cdckit status` judges too (pipelines/status_rules.py), polled by store_health.py:
        # letters no `cdckit dlq replay` has settled, and each store's entries beside Postgres' rows.
        self.table_letters_pending = Gauge("cdckit_table_dead_letters_pending", "dead letters past the mark "
                                           "`cdckit dlq replay` left, per table", ["table"], registry=r)
        self.table_rows_estimate = Gauge("cdckit_table_rows_estimate", "Postgres' estimate of the table's rows "
                                         "(reltuples; NaN: never analyzed, or the table has a row filter)", ["table"], registry=r)
        self.table_store_count = Gauge("cdckit_table_store_count", "entries a store holds per table (search "
                                       "documents, cache keys)", ["table", "store"], registry=r)
        self._pending_tables: set[str] = set()
        self.visible_lsn = Gauge("cdckit_visible_lsn", "WAL position up to which every committed change is in "
                                 "both stores (pipelines/streaming/visibility_publisher.py; 0: none published yet)", registry=r)
        self.position = 0
        self._moved = threading.Condition()
        self.port = port or None
        if not port:
            return
        try:
            self._serve(host, port)
        except OSError as exc:
            log.warning("metrics not served: port %d: %s", port, exc.strerror)
            self.port = None

    def _serve(self, host: str, port: int) -> None:
        """Prometheus' exposition, and `/visible?lsn=L&store=search|cache|both&timeout=S`."""
        from wsgiref.simple_server import make_server

        from prometheus_client import make_wsgi_app
        from prometheus_client.exposition import ThreadingWSGIServer, _SilentHandler

        exposition = make_wsgi_app(self.registry)

        def app(environ, start_response):
            if environ.get("PATH_INFO") == "/visible":
                status, body = visible_answer(self, environ.get("QUERY_STRING", ""))
                start_response(status, [("Content-Type", "application/json")])
                return [body]
            return exposition(environ, start_response)

        server = make_server(host, port, app, ThreadingWSGIServer, handler_class=_SilentHandler)
        threading.Thread(target=server.serve_forever, name="cdckit-metrics", daemon=True).start()

    def visible_position(self, position: int) -> None:
        """The visibility watermark just published to the stores."""
        with self._moved:
            self.position = max(self.position, position)
            self._moved.notify_all()
        self.visible_lsn.set(self.position)

    def wait_position(self, lsn: int, timeout_s: float) -> bool:
        with self._moved:
            return self._moved.wait_for(lambda: self.position >= lsn, timeout=max(0.0, timeout_s))

    def batch(self, stats, seconds: float, rows: Iterable[dict[str, Any]] = (), config=None) -> None:
        """A finished batch: `stats` its totals, `rows` its per-partition stats rows (by table
        through `config`; topics of no configured table, such as the heartbeat's, are left out)."""
        self.records.inc(stats.records)
        # A store left out of `sinks` gets no series (not even zeros).
        sinks = config.sinks if config is not None else ("search", "cache")
        if "search" in sinks:
            self.applied.labels("search").inc(stats.search_applied)
            self.stale.labels("search").inc(stats.search_stale)
        if "cache" in sinks:
            self.applied.labels("cache").inc(stats.cache_applied)
            self.stale.labels("cache").inc(stats.cache_stale)
        self.dead.inc(stats.dead_letters)
        self.batch_seconds.observe(seconds)
        now = time.time()
        self.last_batch.set(now)
        for ms in stats.visible_ms or ():
            self.visible.observe(max(0.0, ms / 1000))
        if stats.newest_source_ts_ms:
            self.freshness.set(max(0.0, now - stats.newest_source_ts_ms / 1000))
        if config is not None:
            self._tables(rows, config, now)

    def _tables(self, rows: Iterable[dict[str, Any]], config, now: float) -> None:
        newest: dict[str, int] = {}
        for row in rows:
            table = config.table_for_topic(row["topic"])
            if table is None:
                continue
            self.table_records.labels(table.name).inc(row.get("records") or 0)
            self.table_dead.labels(table.name).inc(row.get("dead_letters") or 0)
            if row.get("newest_source_ts_ms"):
                newest[table.name] = max(newest.get(table.name, 0), row["newest_source_ts_ms"])
        for name, ts_ms in newest.items():
            self.table_freshness.labels(name).set(max(0.0, now - ts_ms / 1000))

    def lags(self, lag_by_topic: dict[str, int]) -> None:
        for topic, lag in lag_by_topic.items():
            self.lag.labels(topic).set(lag)

    def connector(self, running: bool, task_states: Iterable[str]) -> None:
        """Every state is set (0 when no task has it) so a rule can compare without `absent()`."""
        states = list(task_states)
        self.connector_running.set(1 if running else 0)
        for state in TASK_STATES:
            self.connector_tasks.labels(state).set(states.count(state))

    def slot(self, active: bool, lag_bytes: float | None, retained_bytes: float | None) -> None:
        self.slot_active.set(1 if active else 0)
        self.slot_lag.set(float("nan") if lag_bytes is None else lag_bytes)
        self.slot_retained.set(float("nan") if retained_bytes is None else retained_bytes)

    def snapshot(self, table: str, read: int, total: int) -> None:
        self.snapshot_read.labels(table).set(read)
        self.snapshot_total.labels(table).set(total)

    def letters_pending(self, by_table: dict[str, int], tables: Iterable[str] = ()) -> None:
        """Every configured table gets a value (0: none), and a table no longer pending drops to 0."""
        names = set(tables) | set(by_table) | self._pending_tables
        for name in names:
            self.table_letters_pending.labels(name).set(by_table.get(name, 0))
        self._pending_tables = names

    def store_counts(self, counts: dict[str, dict[str, float | None]]) -> None:
        """table -> {"rows_estimate", "search", "cache"}: what is known (None: not read)."""
        for table, c in counts.items():
            estimate = c.get("rows_estimate")
            self.table_rows_estimate.labels(table).set(float("nan") if estimate is None else estimate)
            for store in ("search", "cache"):
                if c.get(store) is not None:
                    self.table_store_count.labels(table, store).set(c[store])

    def rebuild(self, active: bool, done: int = 0, total: int = 0) -> None:
        self.rebuild_active.set(1 if active else 0)
        self.rebuild_done.set(done)
        self.rebuild_total.set(total)


MAX_WAIT_S = 60.0


def visible_answer(metrics: PipelineMetrics, query: str) -> tuple[str, bytes]:
    """`/visible`: 200 once the stores hold the commit at `lsn`, 408 when `timeout` (seconds,
    default 0, at most 60) passes first, 400 for a bad request; JSON either way."""
    from urllib.parse import parse_qs

    import orjson

    from connectors.visibility_watermark import format_lsn, parse_lsn

    args = {k: v[-1] for k, v in parse_qs(query).items()}
    try:
        lsn = parse_lsn(args["lsn"])
        store = args.get("store", "both")
        if store not in ("search", "cache", "both"):
            raise ValueError(f"store must be search, cache or both, not {store!r}")
        missing = [s for s in (("search", "cache") if store == "both" else (store,)) if s not in metrics.sinks]
        if missing:  # as `cdckit wait` refuses it: no position is ever published for such a store
            raise ValueError(f"this pipeline does not write {', '.join(missing)} (sinks: {', '.join(metrics.sinks)})")
        timeout = min(float(args.get("timeout", 0)), MAX_WAIT_S)
    except (KeyError, ValueError) as exc:
        text = "lsn is required" if isinstance(exc, KeyError) else str(exc)
        return "400 Bad Request", orjson.dumps({"error": text})
    visible = metrics.wait_position(lsn, timeout)
    body = {"visible": visible, "lsn": format_lsn(lsn), "store": store, "watermark": format_lsn(metrics.position)}
    return ("200 OK" if visible else "408 Request Timeout"), orjson.dumps(body)


def pipeline_metrics(config) -> PipelineMetrics | None:
    """The running pipeline's metrics on the config's address (None when `metrics_port` is 0), with
    the source poller started: made once per process, before the job when bootstrap reports to them."""
    if not config.metrics_port:
        return None
    from pipelines.spark.source_health import SourcePoller

    metrics = PipelineMetrics(config.metrics_port, config.metrics_host, tuple(config.sinks))
    if metrics.port is not None:  # nobody could read what it polls
        SourcePoller.for_config(config, metrics).start()
    return metrics
