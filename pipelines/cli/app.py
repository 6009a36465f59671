"""The `cdckit` command line. Every error leaves through `main`, masked and with a typed exit code."""
from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from pipelines.errors import CdckitError

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)
config_option = click.option("--config", "-c", "config_path", type=click.Path(path_type=Path),
                             default=Path("cdckit.yaml"), envvar="CDCKIT_CONFIG", show_default=True,
                             help="the YAML config")


def _load(path: Path):
    from pipelines.config import load_config

    return load_config(path)


def say(text: str) -> None:
    from pipelines.secrets import print_masked

    print_masked(out, text)


def say_error(text: str) -> None:
    from pipelines.secrets import print_masked

    print_masked(err, f"error: {text}")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def app() -> None:
    """Keep a search index and a Redis cache in step with PostgreSQL."""


# -- config ---------------------------------------------------------------------------------------
@app.group("config")
def config_group() -> None:
    """Check the configuration."""


@config_group.command("check")
@config_option
def config_check(config_path: Path) -> None:
    """Validate the config (fields and secrets) without contacting anything."""
    cfg = _load(config_path)
    say(f"config ok: {len(cfg.tables)} table(s), topic prefix '{cfg.topic_prefix}', "
        f"search {cfg.search.kind} at {cfg.search.url}, redis at {cfg.redis.url}")


# -- connector ------------------------------------------------------------------------------------
@app.group("connector")
def connector_group() -> None:
    """Manage the Debezium connector over Kafka Connect's REST API."""


@connector_group.command("apply")
@config_option
def connector_apply(config_path: Path) -> None:
    """Create or update the connector; changes nothing when it is already right."""
    from pipelines.ops import connector as connector_ops

    cfg = _load(config_path)
    result = connector_ops.apply(cfg)
    say(f"connector {cfg.connector_name}: {result.action}")
    for key, old, new in result.changes:
        if old is not None:
            say(f"  - {key}={old}")
        if new is not None:
            say(f"  + {key}={new}")


@connector_group.command("status")
@config_option
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def connector_status(config_path: Path, as_json: bool) -> None:
    """Connector and task states, with the trace of any failed task. Exit 1 unless all run."""
    from pipelines.ops import connector as connector_ops

    cfg = _load(config_path)
    st = connector_ops.status(cfg)
    if as_json:
        body = None if st is None else {"name": st.name, "state": st.state, "worker_id": st.worker_id,
                                        "trace": st.trace, "tasks": [vars(t) for t in st.tasks]}
        say(json.dumps(body, indent=2))
    elif st is None:
        say(f"connector {cfg.connector_name}: not registered (run `cdckit connector apply`)")
    else:
        say(f"connector {st.name}: {st.state} on {st.worker_id}")
        if st.trace:
            say(st.trace)
        for task in st.tasks:
            say(f"  task {task.id}: {task.state} on {task.worker_id}")
            if task.trace:
                say("    " + task.trace.replace("\n", "\n    "))
    sys.exit(0 if st is not None and st.healthy else 1)


def _connector_verb(verb: str, done: str):
    @connector_group.command(verb, help=f"{verb.capitalize()} the connector (with its tasks).")
    @config_option
    def command(config_path: Path) -> None:
        from pipelines.ops import connector as connector_ops

        cfg = _load(config_path)
        getattr(connector_ops.client_for(cfg), verb)(cfg.connector_name)
        say(f"connector {cfg.connector_name}: {done}")

    return command


for _verb, _done in (("pause", "pause requested"), ("resume", "resume requested"), ("stop", "stop requested"),
                     ("restart", "restart requested"), ("delete", "deleted")):
    _connector_verb(_verb, _done)


# -- run ------------------------------------------------------------------------------------------
@app.command("run")
@config_option
def run_command(config_path: Path) -> None:
    """Run the streaming sync (Spark Structured Streaming) until SIGTERM/SIGINT."""
    from pipelines.spark import job

    from pipelines.ops import preflight

    cfg = _load(config_path)
    preflight.check(cfg, postgres="if_reachable")
    logging.getLogger("cdckit").setLevel(logging.INFO)
    sys.exit(job.run(cfg, config_path=config_path))


# -- bootstrap ------------------------------------------------------------------------------------
@app.command("bootstrap")
@config_option
@click.option("--once", is_flag=True, help="exit once the stores are consistent with the snapshot")
def bootstrap_command(config_path: Path, once: bool) -> None:
    """Snapshot the configured tables into both stores, with progress; then keep streaming."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from pipelines.spark import job
    from pipelines.ops import bootstrap
    from pipelines.ops import connector as connector_ops

    from pipelines.ops import preflight

    cfg = _load(config_path)
    preflight.check(cfg, postgres="required")
    lost = bootstrap.topics_lost(cfg)
    if lost:
        aside = bootstrap.start_over(cfg)
        say(f"the change topics were lost ({', '.join(lost)}): re-snapshotting; old checkpoint kept in {aside}")
    totals = bootstrap.prepare(cfg)
    result = connector_ops.apply(cfg)
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

        watch = bootstrap.Watch(cfg, totals, on_progress=advance, done=state, sweep=bootstrap.resnapshot_pending(cfg))

        def finished() -> bool:
            done = watch.check_idle()
            if done:
                for name in tasks:
                    progress.update(tasks[name], completed=max(totals[name], 1))
            return done and once

        code = job.run(cfg, config_path=config_path, on_batch=watch.on_batch, once=finished)
    if watch.done:
        say(f"stores consistent with the snapshot (LSN {watch.done.snapshot_lsn}, "
            f"{watch.done.seconds} s); watermark in {bootstrap.state_path(cfg)}")
    sys.exit(code)


# -- rebuild --------------------------------------------------------------------------------------
@app.command("rebuild")
@click.argument("store", type=click.Choice(["search", "cache", "all"]))
@config_option
@click.option("--table", "table", default=None, help="only this schema.table (search; the cache is one database)")
@click.option("--dry-run", is_flag=True, help="print the plan (topics, offsets, target generations) and stop")
@click.option("--keep-old", is_flag=True, help="keep the old generation after the switch")
@click.option("--force", is_flag=True, help="replay even if it could outlive delete.retention.ms")
@click.option("--json", "as_json", is_flag=True, help="machine-readable plan and summary")
def rebuild_command(store: str, config_path: Path, table: str | None, dry_run: bool, keep_old: bool, force: bool,
                    as_json: bool) -> None:
    """Rebuild STORE from the change topics into a fresh generation, then switch atomically."""
    from pipelines.ops import rebuild

    from pipelines.ops import preflight

    cfg = _load(config_path)
    preflight.check(cfg)
    plan = rebuild.make_plan(cfg, store, table)
    notes = rebuild.check_safety(plan, force)
    if as_json and dry_run:
        _print_json({"plan": plan.as_json(), "notes": notes})
        return
    from pipelines.cli.rebuild_view import RebuildProgress, show_plan

    if not as_json:
        show_plan(out, plan, notes)
    if dry_run:
        return
    from pipelines.spark import job

    spark = job.spark_session(cfg)
    with RebuildProgress(plan, err if as_json else out) as progress:
        state = rebuild.run(spark, cfg, plan, keep_old=keep_old, cb=progress.callbacks())
    summary = state.summary
    if as_json:
        _print_json({"plan": plan.as_json(), "notes": notes, "summary": summary})
    else:
        bulk, catchup = summary.get("bulk", {}), summary.get("catchup", {})
        say(f"rebuild {plan.rebuild_id} done: bulk {bulk.get('records', 0):,} records in {bulk.get('seconds', 0)} s "
            f"({bulk.get('survivors', 0):,} keys written, {bulk.get('dead_letters', 0)} dead letters); catch-up "
            f"{catchup.get('records', 0):,} records ({catchup.get('search_stale', 0) + catchup.get('cache_stale', 0):,} "
            f"already newer: live writes); old generation {summary.get('old_generation')}")
        if bulk.get("unresolved_toast"):
            say(f"warning: {bulk['unresolved_toast']} keys had unchanged TOAST columns whose value neither the log "
                "nor Postgres holds now (rows deleted or re-keyed since: their deletes follow in the log)")


def _print_json(body) -> None:
    """One JSON document on stdout (progress went to stderr), masked like everything printed."""
    from pipelines.secrets import mask

    print(mask(json.dumps(body)), flush=True)


# -- dead letters ---------------------------------------------------------------------------------
@app.group("dlq")
def dlq_group() -> None:
    """The dead-letter topic: records that could not be decoded or applied, with the reason."""


@dlq_group.command("list")
@config_option
@click.option("--from-offset", type=int, default=0, show_default=True)
@click.option("--limit", type=int, default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def dlq_list(config_path: Path, from_offset: int, limit: int, as_json: bool) -> None:
    """Show dead letters: where each record came from and why it was refused."""
    from connectors.kafka.dead_letter_topic import read_letters

    cfg = _load(config_path)
    letters = read_letters(cfg.kafka.client_config(), cfg.dead_letter_topic, from_offset)
    if as_json:
        _print_json({"topic": cfg.dead_letter_topic, "count": len(letters),
                     "letters": [x.as_json() for x in letters[:limit]]})
        return
    table = Table("offset", "source", "stage", "reason")
    for x in letters[:limit]:
        j = x.as_json()
        table.add_row(str(x.offset), j["source"], x.stage, x.reason[:160])
    out.print(table)
    say(f"{len(letters)} dead letter(s) in {cfg.dead_letter_topic}" +
        (f" (first {limit} shown)" if len(letters) > limit else ""))


@dlq_group.command("replay")
@config_option
@click.option("--from-offset", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def dlq_replay(config_path: Path, from_offset: int, as_json: bool) -> None:
    """Apply dead letters again (after a fix). Versioned writes: older letters change nothing."""
    from connectors.kafka.dead_letter_topic import read_letters
    from pipelines.ops.dead_letters import replay

    cfg = _load(config_path)
    result = replay(cfg, read_letters(cfg.kafka.client_config(), cfg.dead_letter_topic, from_offset))
    if as_json:
        _print_json(result)
    else:
        say(f"replayed {result['replayed']} of {result['letters']} dead letter(s): search +{result['search_applied']}, "
            f"cache +{result['cache_applied']}, {result['stale']} already newer; "
            f"{len(result['still_failing'])} still failing")
        for f in result["still_failing"][:50]:
            say(f"  {f['source']}: {f['reason']}")
    sys.exit(1 if result["still_failing"] else 0)


# -- snapshot -------------------------------------------------------------------------------------
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

    cfg = _load(config_path)
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,.0f}/{task.total:,.0f}"),
                  TimeElapsedColumn(), console=out) as progress:
        task = progress.add_task(f"{table} (keys in the cache)", total=1)
        result = add_table(cfg, table, on_progress=lambda done, total: progress.update(task, completed=done,
                                                                                        total=max(total, 1)))
    say(f"{table}: incremental snapshot done in {result['seconds']} s: {result['rows']:,} rows in Postgres, "
        f"{result['in_store']:,} in the store")


# -- verify ---------------------------------------------------------------------------------------
@app.command("verify")
@config_option
@click.option("--table", "table", default=None, help="only this schema.table")
@click.option("--sample", type=int, default=None, help="compare N random rows instead of all")
@click.option("--timeout", "timeout_s", type=float, default=120, show_default=True,
              help="seconds to wait for the pipeline to catch up with the database")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def verify_command(config_path: Path, table: str | None, sample: int | None, timeout_s: float, as_json: bool) -> None:
    """Compare Postgres with both stores once the pipeline has caught up. Exit 1 on any difference."""
    from pipelines.ops import verify

    cfg = _load(config_path)
    try:
        report = verify.verify(cfg, table=table, sample=sample, timeout_s=timeout_s)
    except verify.NotCaughtUp as exc:
        say_error(str(exc))
        sys.exit(3)
    if as_json:
        say(json.dumps(report.as_json(), indent=2, default=str))
    else:
        say(f"caught up with WAL position {report.target_lsn} after {report.waited_s} s")
        for t in report.tables:
            for store, d in t.stores.items():
                state = "exact" if d.clean else ", ".join(f"{n} {k}" for k, n in d.counts.items() if n)
                say(f"{t.table} ({t.rows:,} rows) vs {store}: {state}")
                for doc_id in d.missing:
                    say(f"  missing   {doc_id}")
                for doc_id in d.extra:
                    say(f"  extra     {doc_id}")
                for item in d.different:
                    say(f"  different {item['id']} field {item['field']}: postgres {_cut(item['postgres'])}, "
                        f"store {_cut(item['store'])}")
        say("exact" if report.exact else "DIFFERENCES FOUND")
    sys.exit(0 if report.exact else 1)


def _cut(value, limit: int = 120) -> str:
    """A value for one line of human output: long ones cut, with their length and a hash to tell
    two apart (`--json` keeps them whole)."""
    import hashlib

    text = repr(value)
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return f"{text[:limit]}... ({len(text):,} chars, sha256 {digest})"


# -- status ---------------------------------------------------------------------------------------
@app.command("status")
@config_option
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@click.option("--exact", is_flag=True, help="exact row/document/key counts (scans; slower)")
def status_command(config_path: Path, as_json: bool, exact: bool) -> None:
    """Connector, slot, topics, pipeline and stores as they are now. Exit 1 when unhealthy."""
    from pipelines.ops import status

    cfg = _load(config_path)
    report = status.collect(cfg, exact=exact)
    if as_json:
        say(json.dumps(report.as_json(), indent=2, default=str))
    else:
        _show_status(report)
    sys.exit(0 if report.healthy else 1)


def _show_status(report) -> None:
    c = report.connector or {}
    say(f"connector  {c.get('name', '?')}: {c.get('state', 'unknown')}"
        + "".join(f", task {t['id']} {t['state']}" for t in c.get("tasks", [])))
    sl = report.slot or {}
    if sl.get("exists"):
        say(f"slot       {sl['name']}: {'active' if sl['active'] else 'INACTIVE'}, lag {sl['lag_bytes'] or 0:,} B, "
            f"WAL retained {sl['wal_retained_bytes'] or 0:,} B")
    p = report.pipeline
    if p.get("last_batch_id") is not None:
        fresh = p.get("newest_change_age_s")
        say(f"pipeline   last batch {p['last_batch_id']} {p['last_batch_age_s']} s ago"
            + (f", newest applied change {fresh} s old" if fresh is not None else ""))
    table = Table("topic", "cleanup", "end", "committed", "lag")
    for topic, t in report.topics.items():
        end = sum(t.get("end_offsets", {}).values()) if t.get("exists") else "-"
        committed = sum((t.get("committed_offsets") or {}).values()) if t.get("exists") else "-"
        table.add_row(topic, t.get("cleanup_policy", "missing"), str(end), str(committed),
                      f"{t.get('lag', '-')}{' (growing)' if t.get('lag_growing') else ''}")
    out.print(table)
    rows = Table("table", "postgres", "search docs", "cache keys")
    for name, t in report.tables.items():
        pg = t.get("postgres_rows", t.get("postgres_rows_estimate"))
        rows.add_row(name, "-" if pg is None else (f"{pg}" if "postgres_rows" in t else f"~{pg}"),
                     str(t.get("search_docs", "-")), str(t.get("cache_keys", "-")))
    out.print(rows)
    for w in report.warnings:
        say(f"warning: {w}")
    for problem in report.problems:
        say(f"UNHEALTHY: {problem}")
    say("healthy" if report.healthy else "unhealthy")


# -- devstack -------------------------------------------------------------------------------------
@app.group("devstack")
def devstack_group() -> None:
    """The local stack of real servers on loopback ports (no Docker needed)."""


@devstack_group.command("up")
def devstack_up() -> None:
    """Start the five servers (idempotent) and wait until each answers."""
    from devstack import stack
    from devstack.settings import StackSettings

    settings = StackSettings()
    say(f"local stack in {settings.state_dir}")
    stack.up(settings, say=say)
    _show_stack(stack.status(settings))


@devstack_group.command("down")
def devstack_down() -> None:
    """Stop exactly the processes `up` started."""
    from devstack import stack
    from devstack.settings import StackSettings

    stack.down(StackSettings(), say=say)


@devstack_group.command("status")
def devstack_status() -> None:
    """Which servers run and answer. Exit 1 unless all five are healthy."""
    from devstack import stack
    from devstack.settings import StackSettings

    states = stack.status(StackSettings())
    _show_stack(states)
    sys.exit(0 if all(s.healthy for s in states) else 1)


def _show_stack(states) -> None:
    table = Table("server", "runs", "endpoint", "pid", "state", "log")
    for s in states:
        table.add_row(s.name, s.version, s.endpoint, str(s.pid or "-"),
                      "healthy" if s.healthy else ("not answering" if s.pid else "stopped"), s.log)
    out.print(table)


# -- entry point ----------------------------------------------------------------------------------
def _known_errors() -> tuple[type[BaseException], ...]:
    from connectors.connect_client import ConnectError
    from connectors.postgres import PostgresUnreachable
    from devstack.packages import MissingPackage
    from derived.search_generations import GenerationError
    from devstack.stack import DevstackError

    return (CdckitError, ConnectError, PostgresUnreachable, MissingPackage, DevstackError, GenerationError)


def main(argv: list[str] | None = None) -> int:
    from pipelines.secrets import install_log_masking

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    install_log_masking()
    try:
        app.main(args=argv, prog_name="cdckit", standalone_mode=False)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort:
        return 130
    except _known_errors() as exc:
        say_error(str(exc))
        return getattr(exc, "exit_code", 1)
    return 0


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
