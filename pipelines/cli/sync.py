"""`cdckit run` and `cdckit bootstrap`: the streaming sync, from a snapshot or from where it stopped."""
from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import click

from pipelines.cli.base import app, config_option, load
from pipelines.cli.render import out, say


@app.command("run")
@config_option
def run_command(config_path: Path) -> None:
    """Run the streaming sync (Spark Structured Streaming) until SIGTERM/SIGINT."""
    from pipelines.ops import preflight
    from pipelines.spark import job

    cfg = load(config_path)
    preflight.check(cfg, postgres="if_reachable")
    logging.getLogger("cdckit").setLevel(logging.INFO)
    sys.exit(job.run(cfg, config_path=config_path))


@app.command("bootstrap")
@config_option
@click.option("--once", is_flag=True, help="exit once the stores are consistent with the snapshot")
def bootstrap_command(config_path: Path, once: bool) -> None:
    """Snapshot the configured tables into both stores, with progress; then keep streaming."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from pipelines.ops import bootstrap, connector, preflight
    from pipelines.spark import job
    from pipelines.spark.metrics import pipeline_metrics

    cfg = load(config_path)
    preflight.check(cfg, postgres="required")
    lost = bootstrap.topics_lost(cfg)
    if lost:
        aside = bootstrap.start_over(cfg)
        say(f"the change topics were lost ({', '.join(lost)}): re-snapshotting; old checkpoint kept in {aside}")
    totals = bootstrap.prepare(cfg)
    result = connector.apply(cfg)
    say(f"connector {cfg.connector_name}: {result.action}")
    state = bootstrap.read_state(cfg)
    if state:
        say(f"already bootstrapped ({state.detected_by}, snapshot LSN {state.snapshot_lsn})")
        if once:
            return
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,.0f}/{task.total:,.0f}"),
               TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=out, transient=False) as progress:
        tasks = {name: progress.add_task(name, total=max(total, 1), rate="") for name, total in totals.items()}
        started = time.monotonic()

        def advance(table: str, reads: int) -> None:
            rate = reads / max(time.monotonic() - started, 1e-6)
            progress.update(tasks[table], completed=min(reads, totals[table]), rate=f"{rate:,.0f} rows/s")

        metrics = pipeline_metrics(cfg)
        watch = bootstrap.Watch(cfg, totals, on_progress=advance, done=state, sweep=bootstrap.resnapshot_pending(cfg),
                                metrics=metrics)

        def finished() -> bool:
            done = watch.check_idle()
            if done:
                for name in tasks:
                    progress.update(tasks[name], completed=max(totals[name], 1))
            return done and once

        code = job.run(cfg, config_path=config_path, on_batch=watch.on_batch, once=finished, metrics=metrics)
    if watch.done:
        say(f"stores consistent with the snapshot (LSN {watch.done.snapshot_lsn}, "
            f"{watch.done.seconds} s); watermark in {bootstrap.state_path(cfg)}")
    sys.exit(code)
