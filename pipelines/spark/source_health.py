"""The source side of the running pipeline as metrics: the Debezium connector's state (Connect's
REST status), the replication slot (Postgres), a rebuild's progress (its state beside the
checkpoint), unsettled dead letters and store counts (store_health.py), polled by a daemon thread
in the pipeline process.

A poll that fails never touches the sync: the gauges then say "not running / unknown" and the
failure is logged once per kind, not every poll."""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from pipelines.config import Config

log = logging.getLogger("cdckit.source_health")
POLL_S = 10.0


@dataclass
class ConnectorHealth:
    running: bool
    task_states: list[str] = field(default_factory=list)
    state: str = "UNKNOWN"      # MISSING: not registered


@dataclass
class SlotHealth:
    exists: bool
    active: bool = False
    lag_bytes: int | None = None
    retained_bytes: int | None = None


def connector_health(client, name: str) -> ConnectorHealth:
    """Raises the client's ConnectError when Connect does not answer."""
    from connectors.connect_client import ConnectNotFound

    try:
        st = client.status(name)
    except ConnectNotFound:
        return ConnectorHealth(False, [], "MISSING")
    return ConnectorHealth(st.state == "RUNNING", [t.state for t in st.tasks], st.state)


def slot_health(connect: Callable[[], Any], slot: str) -> SlotHealth:
    """`connect()`: a context manager giving a Postgres connection (connectors.postgres.connect)."""
    from connectors import postgres

    with connect() as conn:
        info = postgres.slot_info(conn, slot)
        current = postgres.current_wal_lsn(conn)
    if info is None:
        return SlotHealth(False)
    lag = current - info.confirmed_flush_lsn if info.confirmed_flush_lsn else None
    return SlotHealth(True, bool(info.active), lag, info.retained_bytes)


class SourcePoller:
    """Sets the connector, slot and rebuild gauges of `metrics` every `interval_s`."""

    def __init__(self, metrics, connector: Callable[[], ConnectorHealth], slot: Callable[[], SlotHealth],
                 rebuild: Callable[[], tuple[bool, int, int]], interval_s: float = POLL_S,
                 letters: Callable[[], dict[str, int] | None] | None = None,
                 stores: Callable[[], dict[str, dict] | None] | None = None, tables: tuple[str, ...] = ()):
        """`letters`, `stores`: pipelines/spark/store_health.py's probes (None: not polled)."""
        self.metrics, self.interval_s, self.tables = metrics, interval_s, tables
        self.probes = {"connector": connector, "slot": slot, "rebuild": rebuild,
                       "dead letters": letters or (lambda: None), "store counts": stores or (lambda: None)}
        self.stopping = threading.Event()
        self._failing: dict[str, str] = {}   # probe -> kind of its current failure (logged once)

    @classmethod
    def for_config(cls, config: Config, metrics, interval_s: float = POLL_S) -> "SourcePoller":
        from connectors import postgres
        from connectors.connect_client import ConnectClient
        from pipelines.spark.store_health import STORE_POLL_S, PendingLetters, store_counts, throttled
        from pipelines.state.rebuild_state import progress_board, progress_totals

        client = ConnectClient(config.connect.url, timeout_s=config.connect.timeout_s)
        boards: dict[str, object] = {}  # one consumer per rebuild, reused between polls

        def read_progress(rebuild_id: str, partitions):
            if rebuild_id not in boards:
                close_boards()
                boards[rebuild_id] = progress_board(config.kafka.client_config(), rebuild_id)
            return boards[rebuild_id].read(partitions, timeout_s=5)

        def close_boards() -> None:
            for old in boards.values():
                old.close()
            boards.clear()

        def rebuild_progress():
            totals = progress_totals(config.spark.checkpoint_dir, read_progress)
            if not totals[0]:
                close_boards()  # no rebuild under way: no consumer kept
            return totals

        letters = PendingLetters(config.kafka.client_config(), config.dead_letter_topic, config.spark.checkpoint_dir,
                                 lambda topic: getattr(config.table_for_topic(topic), "name", None))
        stores_of: list = []   # made at the first count: the poller starts before the job's stores

        def counts():
            if not stores_of:
                from pipelines.apply.stores import stores_from_config

                stores_of.append(stores_from_config(config))
            return store_counts(config, stores_of[0], lambda: postgres.connect(config.postgres.dsn_kwargs()))

        return cls(metrics, lambda: connector_health(client, config.connector_name),
                   lambda: slot_health(lambda: postgres.connect(config.postgres.dsn_kwargs()), config.postgres.slot),
                   rebuild_progress, interval_s, letters, throttled(counts, STORE_POLL_S),
                   tuple(t.name for t in config.tables))

    def start(self) -> "SourcePoller":
        threading.Thread(target=self._loop, name="cdckit-source-health", daemon=True).start()
        return self

    def stop(self) -> None:
        self.stopping.set()

    def _loop(self) -> None:
        while True:
            self.poll()
            if self.stopping.wait(self.interval_s):
                return

    def poll(self) -> None:
        conn = self._ask("connector")
        if conn is None:
            self.metrics.connector(False, [])
        else:
            self.metrics.connector(conn.running, conn.task_states)
        slot = self._ask("slot")
        if slot is None:
            self.metrics.slot(False, None, None)
        else:
            self.metrics.slot(slot.active, slot.lag_bytes, slot.retained_bytes)
        rebuild = self._ask("rebuild")
        if rebuild is not None:  # unknown: keep the last reading rather than claim none runs
            self.metrics.rebuild(*rebuild)
        letters = self._ask("dead letters")   # None (failed, or not due): the gauges stay
        if letters is not None:
            self.metrics.letters_pending(letters, self.tables)
        counts = self._ask("store counts")
        if counts is not None:
            self.metrics.store_counts(counts)

    def _ask(self, probe: str):
        try:
            found = self.probes[probe]()
        except Exception as exc:  # noqa: BLE001 - any failure of a probe: the sync goes on
            kind = type(exc).__name__
            if self._failing.get(probe) != kind:
                log.warning("%s metrics not updated: %s: %s", probe, kind, str(exc).splitlines()[0] if str(exc) else "")
                self._failing[probe] = kind
            return None
        if self._failing.pop(probe, None) is not None:
            log.info("%s metrics updated again", probe)
        return found
