"""Prometheus metrics served by the running pipeline (`metrics_port`, 0 turns them off)."""
from __future__ import annotations

import logging
import time

log = logging.getLogger("cdckit.metrics")


class PipelineMetrics:
    def __init__(self, port: int, host: str = "127.0.0.1"):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

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
        self.port = port
        try:
            start_http_server(port, addr=host, registry=r)
        except OSError as exc:
            log.warning("metrics not served: port %d: %s", port, exc.strerror)
            self.port = None

    def batch(self, stats, seconds: float) -> None:
        self.records.inc(stats.records)
        self.applied.labels("search").inc(stats.search_applied)
        self.applied.labels("cache").inc(stats.cache_applied)
        self.stale.labels("search").inc(stats.search_stale)
        self.stale.labels("cache").inc(stats.cache_stale)
        self.dead.inc(stats.dead_letters)
        self.batch_seconds.observe(seconds)
        self.last_batch.set(time.time())
        for ms in stats.visible_ms or ():
            self.visible.observe(max(0.0, ms / 1000))
        if stats.newest_source_ts_ms:
            self.freshness.set(max(0.0, time.time() - stats.newest_source_ts_ms / 1000))

    def lags(self, lag_by_topic: dict[str, int]) -> None:
        for topic, lag in lag_by_topic.items():
            self.lag.labels(topic).set(lag)
