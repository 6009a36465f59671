"""`cdckit bootstrap`: from empty stores to stores consistent with the database, watched.

Publication and support tables are ensured, the connector applied (initial snapshot), and the sync
runs in this process until it has applied Debezium's final snapshot record; the watermark (source
offsets and the snapshot LSN) is then recorded in a durable state file. The marker can only be
consumed inside a batch that also records it (Spark commits the batch afterwards), so an
interruption at any point is finished by running the command again.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from connectors import postgres
from pipelines.checkpoint_state import committed_offsets
from pipelines.config import Config
from pipelines.json_files import read_json, write_json


def state_path(config: Config) -> Path:
    return config.spark.checkpoint_dir / "cdckit-bootstrap.json"


def read_state(config: Config) -> dict[str, Any] | None:
    return read_json(state_path(config))


def _write_state(config: Config, state: dict[str, Any]) -> None:
    write_json(state_path(config), state, indent=2)


def batch_offsets(config: Config, batch_id: int) -> dict[str, dict[str, int]]:
    lines = (config.spark.checkpoint_dir / "query" / "offsets" / str(batch_id)).read_text().splitlines()
    return json.loads(lines[2])


def prepare(config: Config) -> dict[str, int]:
    """Support tables and publication; returns each table's row count (progress totals)."""
    with postgres.connect(config.postgres.dsn_kwargs()) as conn:
        postgres.ensure_support_tables(conn, config.postgres.heartbeat_table, config.postgres.signal_table)
        postgres.ensure_publication(conn, config.postgres.publication,
                                    [t.name for t in config.tables]
                                    + [config.postgres.signal_table, config.postgres.heartbeat_table])
        return {t.name: conn.execute(f"SELECT count(*) FROM {t.name}").fetchone()[0] for t in config.tables}


@dataclass
class Watch:
    """Follows the snapshot through the batches the job applies."""

    config: Config
    totals: dict[str, int]
    on_progress: Callable[[str, int], None] = lambda table, n: None
    done: dict[str, Any] | None = None
    reads: dict[str, int] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    sweep: bool = False   # a re-snapshot after lost topics: remove what the snapshot did not rewrite

    def on_batch(self, batch_id: int, stats, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            table = self.config.table_for_topic(row["topic"])
            if table is not None and row["snapshot_reads"]:
                self.reads[table.name] = self.reads.get(table.name, 0) + row["snapshot_reads"]
                self.on_progress(table.name, self.reads[table.name])
        if stats.snapshot_last_lsn and self.done is None:
            swept = sweep_below_snapshot(self.config, stats.snapshot_last_lsn) if self.sweep else None
            self.finish(batch_offsets(self.config, batch_id), stats.snapshot_last_lsn, "final snapshot record", swept)

    def finish(self, offsets: dict[str, Any], lsn: int | None, how: str, swept: dict[str, int] | None = None) -> None:
        self.done = {"completed_at": time.time(), "seconds": round(time.monotonic() - self.started, 1),
                     "snapshot_lsn": lsn, "offsets": offsets, "detected_by": how,
                     "rows": dict(self.totals), "snapshot_reads": dict(self.reads)}
        if swept is not None:
            self.done["removed_after_lost_topics"] = swept
        _write_state(self.config, self.done)

    last_check: float = 0.0

    def check_idle(self) -> bool:
        """Other ways to be done: every table empty (Debezium sends no record at all), or the
        snapshot finished before this state file existed and the pipeline has caught up."""
        if self.done is not None:
            return True
        if time.monotonic() - self.last_check < 5:
            return False
        self.last_check = time.monotonic()
        if not _streaming(self.config):
            return False
        committed = committed_offsets(self.config.spark.checkpoint_dir) or {}
        if sum(self.totals.values()) == 0:
            self.finish(committed, None, "empty tables")
        elif _caught_up(self.config, committed) and not self.reads and time.monotonic() - self.started > 15:
            self.finish(committed, None, "snapshot completed earlier; pipeline caught up")
        return self.done is not None


def _streaming(config: Config) -> bool:
    with postgres.connect(config.postgres.dsn_kwargs()) as conn:
        info = postgres.slot_info(conn, config.postgres.slot)
    return info is not None and info.active


def _caught_up(config: Config, committed: dict[str, dict[str, int]]) -> bool:
    from pipelines.kafka_source import end_offsets

    end = end_offsets(config.kafka.client_config(), [config.topic_for(t) for t in config.tables])
    return all(int(committed.get(t, {}).get(p, 0)) >= int(o) for t, parts in end.items() for p, o in parts.items())


RESNAPSHOT = "cdckit-resnapshot.json"


def resnapshot_pending(config: Config) -> bool:
    return (config.spark.checkpoint_dir / RESNAPSHOT).exists() and read_state(config) is None


def topics_lost(config: Config) -> list[str]:
    """Topics the pipeline has read further than they now go (or that are gone): the broker lost
    its data (Tansu keeps nothing across a restart) or someone recreated them."""
    from confluent_kafka.admin import AdminClient

    from pipelines.kafka_source import NoFetchResponse, end_offsets

    committed = committed_offsets(config.spark.checkpoint_dir)
    if not committed:
        return []
    existing = AdminClient(config.kafka.client_config()).list_topics(timeout=10).topics
    present = [t for t in committed if t in existing]
    try:
        ends = end_offsets(config.kafka.client_config(), present) if present else {}
    except NoFetchResponse as exc:  # partitions the broker no longer serves
        return sorted({t for t, _ in exc.tps})
    return sorted(t for t, parts in committed.items()
                  if any(int(o) > 0 for o in parts.values()) and
                  (t not in existing or any(int(ends.get(t, {}).get(p, 0)) < int(o) for p, o in parts.items())))


def start_over(config: Config) -> Path:
    """After lost topics: set the checkpoint aside (kept for inspection) and make the connector
    forget its position, so Debezium snapshots again into the new topics."""
    from connectors.connect_client import ConnectNotFound
    from pipelines.connector_ops import client_for

    ckpt = config.spark.checkpoint_dir
    aside = ckpt.with_name(f"{ckpt.name}.lost-{time.strftime('%Y%m%dT%H%M%S')}")
    os.replace(ckpt, aside)
    ckpt.mkdir(parents=True)
    # Remembered until the new snapshot is in, so an interrupted re-snapshot still sweeps when rerun.
    write_json(ckpt / RESNAPSHOT, {"old_checkpoint": str(aside), "at": time.time()})
    client = client_for(config)
    try:
        _patiently(client.stop, config.connector_name)
    except ConnectNotFound:
        return aside  # Connect lost it too (its topics lived on the same broker): `apply` creates it
    _wait_stopped(client, config.connector_name)
    _patiently(client.reset_offsets, config.connector_name)
    _patiently(client.resume, config.connector_name)
    return aside


def _patiently(call, name: str, attempts: int = 4) -> None:
    """A Connect worker that has just lost its internal topics rebalances for a while, and holds
    requests without answering meanwhile: ask again (stop, reset and resume are idempotent)."""
    from connectors.connect_client import ConnectUnreachable

    for attempt in range(attempts):
        try:
            return call(name)
        except ConnectUnreachable:
            if attempt == attempts - 1:
                raise
            time.sleep(2)


def _wait_stopped(client, name: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if client.status(name).state == "STOPPED":
            return
        time.sleep(0.5)


def sweep_below_snapshot(config: Config, snapshot_lsn: int) -> dict[str, int]:
    """Entries the new snapshot did not rewrite are rows deleted while the topics were lost:
    remove them with a versioned delete at the snapshot's position (newer writes stay)."""
    from derived.change import Change, Position, Version
    from pipelines.apply_batch import stores_from_config

    stores = stores_from_config(config)
    cut = Version(snapshot_lsn, 0, 0)
    removed = {}
    for t in config.tables:
        marker = Change(t.name, "truncate", {}, "", None, cut, Position("", 0, 0))
        removed[t.name] = (stores.search.truncate(marker, stores.search_tables[t.name])
                           + stores.cache.truncate(marker, stores.cache_tables[t.name]))
    return removed
