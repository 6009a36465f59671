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


def state_path(config: Config) -> Path:
    return config.spark.checkpoint_dir / "cdckit-bootstrap.json"


def read_state(config: Config) -> dict[str, Any] | None:
    try:
        return json.loads(state_path(config).read_text())
    except (OSError, ValueError):
        return None


def _write_state(config: Config, state: dict[str, Any]) -> None:
    path = state_path(config)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    os.replace(tmp, path)


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

    def on_batch(self, batch_id: int, stats, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            table = self.config.table_for_topic(row["topic"])
            if table is not None and row["snapshot_reads"]:
                self.reads[table.name] = self.reads.get(table.name, 0) + row["snapshot_reads"]
                self.on_progress(table.name, self.reads[table.name])
        if stats.snapshot_last_lsn and self.done is None:
            self.finish(batch_offsets(self.config, batch_id), stats.snapshot_last_lsn, "final snapshot record")

    def finish(self, offsets: dict[str, Any], lsn: int | None, how: str) -> None:
        self.done = {"completed_at": time.time(), "seconds": round(time.monotonic() - self.started, 1),
                     "snapshot_lsn": lsn, "offsets": offsets, "detected_by": how,
                     "rows": dict(self.totals), "snapshot_reads": dict(self.reads)}
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
