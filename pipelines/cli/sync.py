"""`cdckit run` and `cdckit bootstrap`: the streaming sync, from a snapshot or from where it stopped."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from pipelines.cli.base import app, config_option, err, load, say


@app.command("run")
@config_option
def run_command(config_path: Path) -> None:
    """Run the streaming sync (Spark Structured Streaming). Ctrl-C or SIGTERM stop it after the
    current batch (again: at once)."""
    from pipelines.errors import StateLost
    from pipelines.ops import preflight
    from pipelines.bootstrap import steps as bootstrap
    from pipelines.stopping import StopRequest
    from pipelines.streaming import job
    stop = StopRequest().install()
    cfg = load(config_path)
    preflight.check_servers(cfg)
    preflight.check_database(cfg, required=False)
    lost = bootstrap.topics_lost(cfg)
    if lost:  # else a deleted topic only stops matching the subscription, and the job waits forever
        raise StateLost(f"change topics lost since the pipeline read them ({', '.join(lost[:5])}): the broker lost "
                        "its data or they were deleted or recreated; recover with `cdckit bootstrap` (it re-snapshots)")
    sys.exit(job.run(cfg, config_path=config_path, stop=stop))


@app.command("bootstrap")
@config_option
@click.option("--once", is_flag=True, help="exit once the stores are consistent with the snapshot")
def bootstrap_command(config_path: Path, once: bool) -> None:
    """Snapshot the configured tables into both stores, with progress; then keep streaming. A
    snapshot that left dead letters ends it (exit 7, with or without --once): the stores are not
    consistent with it, and streaming on would hide that."""
    from pipelines.cli.progress_view import ProgressView
    from pipelines.errors import DeadLettersLeft
    from pipelines.ops import connector_admin, preflight
    from pipelines.bootstrap import steps as bootstrap
    from pipelines.state import bootstrap_state
    from pipelines.stopping import StopRequest
    from pipelines.streaming import job
    from pipelines.spark.metrics import pipeline_metrics

    stop = StopRequest().install()
    cfg = load(config_path)
    preflight.check_servers(cfg)
    preflight.check_database(cfg, required=True)
    # Spark's session (a JVM, ~5-10 s of a core) starts beside the connector's creation and
    # Debezium's snapshot, not after them: the first minute's largest fixed cost
    # (benchmarks/first_minute.py). `--once` asks for it only if its snapshot needs it.
    warm = SessionWarmup(cfg)
    if not once:
        warm.start_now()
    lost = bootstrap.topics_lost(cfg)
    if lost:
        aside = bootstrap.start_over(cfg)
        say(f"the change topics were lost ({', '.join(lost)}): re-snapshotting; old checkpoint kept in {aside}")
    totals = bootstrap.prepare(cfg)
    if once and (cfg.documents or not bootstrap.applied_without_spark(cfg, totals)):
        warm.start_now()
    result = connector_admin.apply(cfg)
    say(f"connector {cfg.connector_name}: {result.action}")
    state = bootstrap.read_state(cfg)
    if state:
        if bootstrap.snapshot_letters_pending(cfg, state):
            raise DeadLettersLeft(bootstrap.letters_message(state.dead_letters, settled_since=True))
        say(f"already bootstrapped ({state.detected_by}, snapshot LSN {state.snapshot_lsn}); streaming")
        if once:
            return
    else:
        say("snapshot: " + ", ".join(f"{name} {n:,} rows" for name, n in totals.items())
            + " (counted now; changes meanwhile stream after it)")
    with ProgressView(err) as progress:
        if not state:
            for name, total in totals.items():
                progress.add(name, total, unit="rows")

        def advance(table: str, reads: int) -> None:
            if table in progress.tasks:
                progress.update(table, reads)

        metrics = pipeline_metrics(cfg)
        watch = bootstrap.Watch(cfg, totals, on_progress=advance, done=state, sweep=bootstrap.resnapshot_pending(cfg),
                                metrics=metrics)

        if bootstrap.bulk_applicable(cfg, state):
            from pipelines.stopping import Interrupted

            try:   # a small snapshot is applied before (or without) Spark's session
                bootstrap.apply_in_bulk(warm.session, cfg, watch, stop)
            except Interrupted:
                warm.stop()
                say("stopped before the snapshot was applied; run `cdckit bootstrap` again to finish it")
                sys.exit(0)
            for name in list(progress.tasks):
                progress.finish(name)
            if watch.done is not None and watch.done.dead_letters:
                warm.stop()
                raise DeadLettersLeft(bootstrap.letters_message(watch.done.dead_letters))
            if once and not cfg.documents:
                warm.stop()
                sys.exit(0)

        documents_end: list = []

        def finished() -> bool:
            watch.check_connector()
            done = watch.check_idle()
            if done and not state:
                for name in list(progress.tasks):
                    progress.finish(name)
                if watch.done.dead_letters:
                    return True   # not consistent: said below, rather than stream on
            if done and once and cfg.documents:  # and the nested documents built from the snapshot
                if not documents_end:
                    documents_end.append(bootstrap.documents_topic_ends(cfg))
                # (a re-snapshot's sweep of the documents follows their query: see LiveDocuments.tend)
                return (bootstrap.documents_applied(cfg, documents_end[0])
                        and bootstrap_state.documents_sweep(cfg.spark.checkpoint_dir) is None)
            return done and once

        warm.session()   # job.run takes the same session (an error of its start is raised here)
        code = job.run(cfg, config_path=config_path, on_batch=watch.on_batch, once=finished, stop=stop,
                       metrics=metrics)
    if not watch.done:
        say("stopped before the snapshot was applied; run `cdckit bootstrap` again to finish it")
    elif not state and watch.done.dead_letters:
        raise DeadLettersLeft(bootstrap.letters_message(watch.done.dead_letters))
    sys.exit(code)


class SessionWarmup:
    """The Spark session started in a thread of its own; `session()` waits for it (and raises what
    its start raised). pyspark installs its SIGINT handler only from the main thread, so the
    command's own Ctrl-C handling stays as it is."""

    def __init__(self, cfg):
        import threading

        self.cfg, self.spark, self.error = cfg, None, None
        self.thread = threading.Thread(target=self._run, name="spark-warmup", daemon=True)

    def start_now(self) -> "SessionWarmup":
        if self.thread.ident is None:   # not started yet
            self.thread.start()
        return self

    def _run(self) -> None:
        import logging
        import time

        from pipelines.spark.session import spark_session

        began = time.monotonic()
        try:
            self.spark = spark_session(self.cfg)
            logging.getLogger("cdckit.bootstrap").info("Spark session up in %.1f s (started beside the "
                                                       "connector)", time.monotonic() - began)
        except BaseException as exc:  # noqa: BLE001 - raised in the command's thread by session()
            self.error = exc

    def session(self):
        self.start_now()   # not started yet (`--once` with a snapshot it meant to apply itself): now
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.spark

    def stop(self) -> None:
        """The session stopped if it is up; one still starting is not waited for: its JVM is ended."""
        if self.thread.is_alive():
            from pipelines.spark.session import end_starting_jvm

            end_starting_jvm()
        elif self.spark is not None:
            self.spark.stop()

