"""The running job publishes each store's visibility watermark (connectors/visibility_watermark.py says why
it holds) into the store and its metrics, from a thread of its own, between and after batches.

- Both stores get the same position: every query (the tables', the documents') writes both, and
  a query's offsets count once its batch is committed, that is after its writes.
- The search engine shows a write to a search only after a refresh: the written aliases are
  refreshed before the position is published there (a GET by id sees it at once anyway).
- A batch's search writes are also made searchable at this thread's next round after the batch
  says so (`written`), not at the engine's next scheduled refresh (up to its interval, 1 s by
  default, later) nor at the position's next move (Debezium confirms to the slot about once a
  second): only the indexes refreshed every second or faster (a longer interval chose throughput
  over freshness; the position's moves still refresh them).
- Rebuilds: a fresh generation holds at least what the live one holds by its switch (the live
  pipeline writes it too from the catch-up on, or the rebuild replays to the log's end), so the
  position carries over: the search document is not behind an alias, and the cache's key is
  copied into the database SWAPDB brings in (pipelines/rebuild/phases._switch), with this thread held off by
  the same lock meanwhile, so readers never see it go back.
- A restarted job starts from the stores' positions: publishing only moves them forward.
"""
from __future__ import annotations

import logging
import re
import threading
import time
from pathlib import Path

from connectors.kafka.offsets import Watermarks as KafkaMarks, next_end, to_offsets
from connectors.visibility_watermark import Watermark
from pipelines.config import Config
from pipelines.state import documents_state
from pipelines.state.query_offsets import committed_offsets

log = logging.getLogger("cdckit.visibility")

INTERVAL_S = 0.1
# Indexes refreshed this often or faster are refreshed after each batch that wrote them.
NEAR_REAL_TIME_S = 1.0
SNAPSHOT_CHECK_S = 2.0
ALIASES_S = 5.0


class VisibilityPublisher:
    """`with VisibilityPublisher(config, metrics):` while the job runs."""

    def __init__(self, config: Config, metrics=None, config_path: Path | None = None, interval_s: float = INTERVAL_S):
        self.config, self.metrics, self.interval_s = config, metrics, interval_s
        self.config_path, self._config, self._config_at = config_path, config, time.monotonic()
        self._kafka: KafkaMarks | None = None
        self.watermark = Watermark()
        self.published = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cdckit-visibility", daemon=True)
        self._conn = None          # postgres.connect's context manager, entered
        self._conn_handle = None
        self._sinks = None
        self._indexes: list = []
        self._aliases_at = float("-inf")
        self._snapshot_done = False
        self._snapshot_checked = 0.0
        self._failing = False
        self._sampled_lsn = -1
        self._written = threading.Event()
        self._refresh_failing = False

    def __enter__(self) -> "VisibilityPublisher":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)
        self._close()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.step()
                if self._failing:
                    log.info("visibility watermark published again")
                self._failing = False
            except Exception as exc:  # noqa: BLE001 - a store or the database away: the next round retries
                if not self._failing:
                    log.warning("visibility watermark not published: %s: %s", type(exc).__name__, str(exc)[:200])
                self._failing = True
                self._close()
                self._stop.wait(1.0)

    def written(self) -> None:
        """A batch wrote the stores (called from the batch's thread): what it wrote to the search
        indexes is made searchable at the next round."""
        self._written.set()

    def step(self) -> int:
        """One sample, one advance; publishes when the position moved (the written indexes
        refreshed first); else makes what batches wrote searchable. Returns the watermark."""
        written, before = self._written.is_set(), self.published
        self._written.clear()
        try:
            return self._advance()
        finally:
            # Not while the initial snapshot streams in (a load: each refresh writes a segment), nor
            # when a publish just refreshed them.
            if written and self._snapshot_done and self.published == before:
                self._make_readable()

    def _advance(self) -> int:
        if not self._snapshot_committed():
            return self.published
        lsn = self._confirmed_lsn()
        if lsn > self._sampled_lsn:
            # Topics listed in the same call, after the slot's read: a topic created for a commit below
            # `lsn` (a table's first row) is in this sample, with its records. A slot that has not moved
            # needs no new sample: one with the same position and later ends is never covered sooner
            # (the ends are fetched from the broker: at 10 rounds a second that was most of this
            # thread's cost and some of the broker's).
            marks = self._marks()
            ends = to_offsets(next_end({}, marks.high(marks.partitions()))[1])
            self.watermark.sample(lsn, ends)
            self._sampled_lsn = lsn
        if not self.watermark.samples:
            return self.published   # nothing waits to be covered
        committed = self._committed()
        if committed is None:
            return self.published   # the documents' state moved while read: the next round
        position = self.watermark.advance(committed)
        if position > self.published:
            self._publish(position)
        return self.published

    def _snapshot_committed(self) -> bool:
        """The initial snapshot's reads are not confirmed through the slot: no position before it is in."""
        if self._snapshot_done or time.monotonic() - self._snapshot_checked < SNAPSHOT_CHECK_S:
            return self._snapshot_done
        from connectors.connect_client import ConnectClient
        from pipelines.state.bootstrap_state import read_state

        self._snapshot_checked = time.monotonic()
        connect = ConnectClient(self.config.connect.url, timeout_s=self.config.connect.timeout_s)
        self._snapshot_done = (read_state(self.config.spark.checkpoint_dir) is not None
                               or connect.snapshot_committed(self.config.connector_name))
        return self._snapshot_done

    def _confirmed_lsn(self) -> int:
        from connectors import postgres

        if self._conn is None:
            self._conn = postgres.connect(self.config.postgres.dsn_kwargs())   # held open: a query per round
            self._conn_handle = self._conn.__enter__()
        info = postgres.slot_info(self._conn_handle, self.config.postgres.slot)
        return int(info.confirmed_flush_lsn or 0) if info is not None else 0

    def _close(self) -> None:
        if self._kafka is not None:
            self._kafka.close()
            self._kafka = None
        if self._conn is not None:
            try:
                self._conn.__exit__(None, None, None)
            except Exception:  # noqa: BLE001 - already broken
                pass
            self._conn = None

    def _marks(self) -> KafkaMarks:
        if self._kafka is None:
            self._kafka = KafkaMarks(self.config.kafka.client_config(), pattern=re.compile(self.config.topic_pattern))
        return self._kafka

    def _committed(self) -> dict[str, dict[str, int]] | None:
        """Per partition, what every query reading it has committed (the lower of two); None when
        the documents' state was handed over meanwhile (the old query's last batches commit
        offsets they did not write)."""
        ckpt = self.config.spark.checkpoint_dir
        tables = committed_offsets(ckpt) or {}
        if not self.config.documents:
            return tables
        folder = documents_state.current(ckpt)
        documents = documents_state.applied(folder) or {}   # held transactions are not applied yet
        if documents_state.current(ckpt) != folder:
            return None
        merged = {t: dict(p) for t, p in tables.items()}
        for topic in self.config.document_topics:
            a, b = tables.get(topic) or {}, documents.get(topic) or {}
            merged[topic] = {p: min(int(a.get(p, -1)), int(b.get(p, -1))) for p in set(a) | set(b)}
        return merged

    def _live_sinks(self, config: Config) -> dict:
        if self._sinks is None:
            from pipelines.apply.stores import marker_definition
            from pipelines.apply.stores import live_sinks

            sinks = live_sinks(config)
            for sink in sinks.values():   # kept once every one is prepared: a failure prepares again next round
                sink.prepare_visible(config.topic_prefix, marker_definition(config))
            self._sinks = sinks
        return self._sinks

    def _make_readable(self) -> None:
        """The near-real-time indexes refreshed; a failure only logged (their scheduled refresh
        shows the writes), once until one succeeds."""
        from derived.sinks.search.sink import refreshed_within

        try:
            config = self._live_config()
            sink = self._live_sinks(config).get("search")
            if sink is None:
                return
            sink.make_readable([t for t in self._written_indexes(config, sink)
                                if refreshed_within(t.refresh_interval, NEAR_REAL_TIME_S)])
            self._refresh_failing = False
        except Exception as exc:  # noqa: BLE001 - the engine away: the next batch's round tries again
            if not self._refresh_failing:
                log.warning("search indexes not refreshed after a batch (%s: %s): the writes show at the "
                            "engine's next scheduled refresh", type(exc).__name__, str(exc)[:200])
            self._refresh_failing = True

    def _publish(self, position: int) -> None:
        config = self._live_config()
        prefix = config.topic_prefix
        for name, sink in self._live_sinks(config).items():
            if not sink.marked(prefix):
                continue   # the store lost its data (its marker gone): no position; the job stops writing it
            if name == "search":
                sink.publish_visible(prefix, position, self._written_indexes(config, sink))
                continue
            # A cache rebuild copies the key into its database under this lock, then swaps.
            with documents_state.handover_lock(config.spark.checkpoint_dir):
                sink.publish_visible(prefix, position, [])
        self.published = position
        if self.metrics is not None:
            self.metrics.visible_position(position)

    def _written_indexes(self, config: Config, sink) -> list:
        """The indexes the job writes that exist (an alias not made yet would fail the refresh),
        listed again every ALIASES_S (an index made since)."""
        from derived.sinks.search.sink import SearchTable
        from pipelines.apply.stores import refresh_intervals

        if time.monotonic() - self._aliases_at > ALIASES_S:
            tables = (SearchTable(n, refresh_interval=every) for n, every in sorted(refresh_intervals(config).items()))
            self._indexes = [t for t in tables if sink.holds(t)]
            self._aliases_at = time.monotonic()
        return self._indexes

    def _live_config(self) -> Config:
        """The config file again every few seconds (tables added to the running job)."""
        if self.config_path is not None and time.monotonic() - self._config_at > ALIASES_S:
            from pipelines.config import load_config

            self._config_at = time.monotonic()
            try:
                self._config = load_config(self.config_path)
            except Exception:  # noqa: BLE001 - the job logs a bad edit; the previous config stays
                pass
        return self._config
