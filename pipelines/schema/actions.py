"""What the job's schema watch (pipelines/schema/column_watch.py) does to the world: reads the
catalog, signals Debezium, extends an index mapping, starts a rebuild."""
from __future__ import annotations

import logging
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from connectors import postgres
from connectors.table_shape import Column
from pipelines.config import Config

log = logging.getLogger("cdckit.schema")


class JobSchemaActions:
    def __init__(self, config: Callable[[], Config], stores: Callable[[], object], config_path: Path | None):
        self.config, self.stores, self.config_path = config, stores, config_path

    def columns(self, tables: list[str]) -> dict[str, list[Column]]:
        with postgres.connect(self.config().postgres.dsn_kwargs()) as conn:
            return {t: postgres.table_columns(conn, t) for t in tables}

    def signal_resnapshot(self, table: str) -> str:
        pg = self.config().postgres
        with postgres.connect(pg.dsn_kwargs()) as conn:
            return postgres.request_incremental_snapshot(conn, pg.signal_table, table)

    def windows(self) -> int:
        pg = self.config().postgres
        with postgres.connect(pg.dsn_kwargs()) as conn:
            return postgres.snapshot_windows(conn, pg.signal_table)

    def completed(self) -> set[str]:
        """The signal ids of the incremental snapshots Debezium says completed."""
        from connectors.kafka.notifications import completed_snapshots

        cfg = self.config()
        try:
            return completed_snapshots(cfg.kafka.client_config(), cfg.notification_topic)
        except Exception as exc:  # noqa: BLE001 - the broker not answering: the windows decide
            log.debug("notifications not read: %s", exc)
            return set()

    def extend_mapping(self, table: str, fields: dict[str, str]) -> None:
        """The new fields' mappings into the live index, in place (adding a field is allowed)."""
        cfg = self.config()
        if "search" not in cfg.sinks:
            return
        stores = self.stores()
        search_table = stores.search_tables[table]
        properties = _field_mappings(fields, cfg, table)
        if properties:
            stores.search.engine.put_mapping(search_table.alias, properties)
            log.warning("schema change: %s: index mapping of %s extended with %s", table, search_table.alias,
                        ", ".join(sorted(properties)))

    def start_rebuild(self, stores: list[str], table: str) -> None:
        """`cdckit rebuild <store> --table T` in the background; its progress shows in `status`."""
        if self.config_path is None:
            log.error("schema change: %s needs `cdckit rebuild %s --table %s`: run it (no config file to start "
                      "it with)", table, _which(stores), table)
            return
        folder = Path(self.config().spark.checkpoint_dir) / "schema"
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / f"rebuild-{table}.log", "ab") as out:  # the child keeps its own descriptor
            subprocess.Popen([sys.executable, "-m", "pipelines.cli", "rebuild", _which(stores), "--table", table,
                              "-c", str(self.config_path)], stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        log.warning("schema change: %s: started `cdckit rebuild %s --table %s` (log %s)", table, _which(stores),
                    table, folder / f"rebuild-{table}.log")

    def rebuild_finished(self, since: float) -> bool:
        """The rebuild started at `since` (or a later one) reached its end; also when it failed and
        nothing runs any more (its log says why; `status` shows a failed rebuild)."""
        from pipelines.state import rebuild_state
        state = rebuild_state.load(self.config().spark.checkpoint_dir)
        if state is None or state.started_at < since - 60:
            return time.time() - since > 600  # never began: give up waiting on it
        return state.phase == "done"


def _which(stores: list[str]) -> str:
    return "all" if set(stores) >= {"search", "cache"} else stores[0]


def _field_mappings(fields: dict[str, str], cfg: Config | None = None, table: str | None = None) -> dict[str, dict]:
    """Document field -> mapping for these Postgres types (the index definition's rules, with the
    table's options and its configured mappings over them; a field left to dynamic mapping is left out)."""
    try:
        from derived.sinks.search.definition import field_mapping
    except ImportError:  # dynamic mapping: the engine maps a new field from its first value
        return {}
    tc = next((t for t in cfg.tables if t.name == table), None) if cfg is not None else None
    if tc is None:
        return {f: m for f, t in fields.items() if (m := field_mapping(t)) is not None}
    from derived.sinks.search.definition import field_mappings
    from pipelines.apply.stores import options_for

    o = options_for(cfg, tc)
    column_of = {field: column for column, field in o.rename.items()}
    # The index definition's own rules (numeric_as_number by column, JSON under a strict index, ...).
    out = field_mappings({column_of.get(f, f): t for f, t in fields.items()}, o)
    out.update({f: dict(o.mappings[f]) for f in fields if f in o.mappings})
    return out
