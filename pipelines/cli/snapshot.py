"""`cdckit snapshot add SCHEMA.TABLE`."""
from __future__ import annotations

from pathlib import Path

import click

from pipelines.cli.base import app, config_option, load, out, say


@app.group("snapshot")
def snapshot_group() -> None:
    """Ad-hoc (incremental) snapshots."""


@snapshot_group.command("add")
@click.argument("table")
@config_option
def snapshot_add(table: str, config_path: Path) -> None:
    """Add TABLE (schema.table, already in the config) to the running pipeline via an incremental snapshot."""
    _incremental(table, config_path)


@snapshot_group.command("resync")
@click.argument("table")
@config_option
def snapshot_resync(table: str, config_path: Path) -> None:
    """Re-read every row of TABLE (already synced) while the pipeline runs: after a schema change
    that rewrote rows without change events (ADD COLUMN ... DEFAULT, DROP or RENAME COLUMN)."""
    _incremental(table, config_path)


def _incremental(table: str, config_path: Path) -> None:
    from pipelines.cli.progress_view import ProgressView
    from pipelines.ops.snapshot_add import add_table

    cfg = load(config_path)
    name = f"{table} (keys in the cache)"
    with ProgressView(out) as progress:
        progress.add(name, 0, unit="keys")

        def advance(done: int, total: int) -> None:
            progress.set_total(name, total)
            progress.update(name, done)

        result = add_table(cfg, table, on_progress=advance)
    say(f"{table}: incremental snapshot done in {result['seconds']} s: {result['rows']:,} rows in Postgres, "
        f"{result['in_store']:,} in the store")
