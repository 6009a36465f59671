"""`cdckit snapshot add SCHEMA.TABLE`."""
from __future__ import annotations

from pathlib import Path

import click

from pipelines.cli.base import app, config_option, load
from pipelines.cli.render import out, say


@app.group("snapshot")
def snapshot_group() -> None:
    """Ad-hoc (incremental) snapshots."""


@snapshot_group.command("add")
@click.argument("table")
@config_option
def snapshot_add(table: str, config_path: Path) -> None:
    """Add TABLE (schema.table, already in the config) to the running pipeline via an incremental snapshot."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from pipelines.ops.snapshot import add_table

    cfg = load(config_path)
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,.0f}/{task.total:,.0f}"),
                  TimeElapsedColumn(), console=out) as progress:
        task = progress.add_task(f"{table} (keys in the cache)", total=1)
        result = add_table(cfg, table, on_progress=lambda done, total: progress.update(task, completed=done,
                                                                                        total=max(total, 1)))
    say(f"{table}: incremental snapshot done in {result['seconds']} s: {result['rows']:,} rows in Postgres, "
        f"{result['in_store']:,} in the store")
