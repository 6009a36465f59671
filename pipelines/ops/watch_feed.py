"""`cdckit status --watch`, the fetching part: the pipeline's metrics endpoint every refresh; store
counts, and what the metrics lack (Kafka lag, connector, slot), at most every `slow_s` (counting
is expensive) and in a background thread, so an unreachable server (Kafka waits 10 s) never holds
up the refresh. Every failure becomes a line of the view: the watch never stops on one."""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from typing import Any, Callable
from urllib.parse import urlsplit, urlunsplit

from pipelines.config import Config
from pipelines.ops.watch_view import Connector, Fetched, Scrape, Slot, connector_from, missing_lag, parse_scrape, slot_from

SLOW_S = 10.0


def metrics_url(config: Config) -> str | None:
    """The pipeline's endpoint from the config (None: metrics off); a wildcard listen address is
    reached on loopback."""
    if not config.metrics_port:
        return None
    host = config.metrics_host
    host = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
    return f"http://{f'[{host}]' if ':' in host else host}:{config.metrics_port}/metrics"


def shown_url(url: str) -> str:
    """The URL without credentials, for the screen."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=host))
    return url


class Feed:
    def __init__(self, config: Config, url: str, slow_s: float = SLOW_S, get: Callable[..., Any] | None = None,
                 clock: Callable[[], float] = time.monotonic, background: bool = True):
        import requests

        self.config, self.url, self.slow_s, self.clock, self.background = config, url, slow_s, clock, background
        self.get = get or requests.get
        self.topics = {t.name: config.topic_for(t) for t in config.tables}
        self._slow_at: float | None = None
        self._slow = Fetched()
        self._busy = threading.Lock()
        self._stores = None
        # The view reports the clients' failures itself; their own logs would garble it.
        for name in ("opensearch", "elasticsearch", "elastic_transport", "urllib3"):
            logging.getLogger(name).setLevel(logging.CRITICAL)

    def sample(self) -> tuple[Scrape | None, Fetched]:
        scrape, error = self.scrape()
        now = self.clock()
        if (self._slow_at is None or now - self._slow_at >= self.slow_s) and self._busy.acquire(blocking=False):
            self._slow_at = now
            if self.background:
                threading.Thread(target=self._refresh, args=(scrape,), daemon=True).start()
            else:
                self._refresh(scrape)
        slow = self._slow
        return scrape, Fetched(error, slow.counts, slow.kafka_lag, slow.connector, slow.slot, list(slow.problems))

    def scrape(self) -> tuple[Scrape | None, str | None]:
        try:
            resp = self.get(self.url, timeout=5)
            resp.raise_for_status()
            return parse_scrape(resp.text, self.clock()), None
        except Exception as exc:  # noqa: BLE001 - refused, timed out, not a metrics page: say so, retry
            return None, f"metrics endpoint {shown_url(self.url)} does not answer ({type(exc).__name__}); retrying"

    def _refresh(self, scrape: Scrape | None) -> None:
        try:
            self.slow(scrape)
        finally:
            self._busy.release()

    def slow(self, scrape: Scrape | None) -> Fetched:
        """Each answer is shown as soon as it is in (the quick ones first), replacing the last one."""
        problems: list[str] = []
        self._publish(connector=None if connector_from(scrape) else self._connector(),
                      slot=None if slot_from(scrape) else self._slot())
        counts: dict[str, dict[str, int | None]] = {}
        self._counts(counts, problems)
        self._publish(counts=counts)
        lacking = missing_lag(scrape, self.topics)
        lag: dict[str, int] = {}
        if lacking:
            self._kafka_lag(lag, problems, lacking)
        self._publish(kafka_lag=lag, problems=problems)
        return self._slow

    def _publish(self, **fields: Any) -> None:
        self._slow = replace(self._slow, **fields)  # a new object: the view never reads half an update

    def _counts(self, counts: dict[str, dict[str, int | None]], problems: list[str]) -> None:
        """Documents and keys per table as `cdckit status` counts them (the cache's own counter)."""
        cfg = self.config
        try:
            if self._stores is None:
                from pipelines.apply.stores import stores_from_config

                self._stores = stores_from_config(cfg)
            s = self._stores
        except Exception as exc:  # noqa: BLE001 - a client that cannot be built
            problems.append(f"store counts: {type(exc).__name__}")
            return
        failed: set[str] = set()
        for t in cfg.flat_tables:
            row = counts.setdefault(t.name, {})
            if "search" in cfg.sinks and "search" not in failed:
                try:
                    row["search_docs"] = s.search.count(s.search_tables[t.name])
                except Exception as exc:  # noqa: BLE001 - connection errors of either client library
                    failed.add("search")
                    problems.append(f"search at {cfg.search.url}: {type(exc).__name__}")
            if "cache" in cfg.sinks and "cache" not in failed:
                try:
                    row["cache_keys"] = s.cache.count(s.cache_tables[t.name])
                except Exception as exc:  # noqa: BLE001 - redis connection errors
                    failed.add("cache")
                    problems.append(f"redis at {cfg.redis.url}: {type(exc).__name__}")

    def _kafka_lag(self, lag: dict[str, int], problems: list[str], tables: list[str]) -> None:
        """End offsets minus the checkpoint's committed offsets, where this host sees the checkpoint
        (shared storage); without it the lag stays unknown."""
        from connectors.kafka.clients import topic_names
        from connectors.kafka.offsets import end_offsets
        from pipelines.state.query_offsets import applied_offsets

        ckpt = self.config.spark.checkpoint_dir
        if not ckpt.exists():
            return
        conf = {**self.config.kafka.client_config(), "log_level": 0}  # librdkafka writes to the terminal itself
        try:
            existing = topic_names(conf)
            topics = [self.topics[t] for t in tables if self.topics[t] in existing]
            end = end_offsets(conf, topics) if topics else {}
        except Exception as exc:  # noqa: BLE001 - KafkaException: the broker does not answer
            problems.append(f"Kafka at {self.config.kafka.bootstrap_servers}: {type(exc).__name__}")
            return
        committed = applied_offsets(ckpt) or {}
        for t in tables:
            parts = end.get(self.topics[t])
            if parts is not None:
                done = committed.get(self.topics[t], {})
                lag[t] = sum(max(0, int(o) - int(done.get(p, 0))) for p, o in parts.items())

    def _connector(self) -> Connector:
        from pipelines.ops.connector_admin import client_for
        from pipelines.spark.source_health import connector_health

        try:
            h = connector_health(client_for(self.config), self.config.connector_name)
        except Exception as exc:  # noqa: BLE001 - Connect unreachable
            return Connector(None, state=f"unknown (Kafka Connect: {type(exc).__name__})", source="connect")
        tasks = {s: h.task_states.count(s) for s in sorted(set(h.task_states))}
        return Connector(h.running, tasks, h.state, source="connect")

    def _slot(self) -> Slot:
        from connectors import postgres
        from pipelines.spark.source_health import slot_health

        try:
            h = slot_health(lambda: postgres.connect(self.config.postgres.reader_dsn_kwargs()), self.config.postgres.slot)
        except Exception:  # noqa: BLE001 - Postgres unreachable
            return Slot(None, source="postgres")
        return Slot(h.active, h.lag_bytes, h.retained_bytes, h.exists, source="postgres")
