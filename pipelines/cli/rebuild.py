"""`cdckit rebuild search|cache|all`: the command, the plan it shows, and its progress bars fed by
the Spark tasks."""
from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from pipelines.cli.base import app, config_option, err, load, out, print_json, say
from pipelines.secrets import print_masked


@app.command("rebuild")
@click.argument("store", type=click.Choice(["search", "cache", "all"]))
@config_option
@click.option("--table", "table", default=None, help="only this schema.table (search; the cache is one database; documents: with `all`)")
@click.option("--dry-run", is_flag=True, help="print the plan (topics, offsets, target generations) and stop")
@click.option("--keep-old", is_flag=True, help="keep the old generation after the switch")
@click.option("--force", is_flag=True, help="replay even if it could outlive delete.retention.ms")
@click.option("--accept-dead-letters", "accept_dead_letters", type=click.IntRange(min=0), default=0,
              show_default=True, metavar="N",
              help="switch even though up to N records of the replay were dead-lettered (more: no switch, exit 7)")
@click.option("--json", "as_json", is_flag=True, help="machine-readable plan and summary")
def rebuild_command(store: str, config_path: Path, table: str | None, dry_run: bool, keep_old: bool, force: bool,
                    accept_dead_letters: int, as_json: bool) -> None:
    """Rebuild STORE from the change topics into a fresh generation, then switch atomically.
    Ctrl-C or SIGTERM stop it after the running tasks; the same command resumes it. Records of the
    replay that were dead-lettered (more than --accept-dead-letters) stop the switch: the old
    generation stays, the fresh one is dropped, exit 7."""
    from pipelines.errors import DeadLettersLeft
    from pipelines.ops import preflight
    from pipelines.rebuild import phases as rebuild
    from pipelines.rebuild import switch_gate as rebuild_letters
    from pipelines.stopping import Interrupted, StopRequest

    stop = StopRequest("after the running tasks").install()
    again = f"cdckit rebuild {store}" + (f" --table {table}" if table else "") + f" -c {config_path}"
    cfg = load(config_path)
    preflight.check_servers(cfg)
    plan = rebuild.make_plan(cfg, store, table)
    notes = rebuild.check_safety(plan, force)
    if as_json and dry_run:
        print_json({"plan": plan.as_json(), "notes": notes})
        return
    if not as_json:
        show_plan(out, plan, notes)
    if dry_run or stop.is_set():
        return
    from pipelines.spark.session import spark_session

    spark = spark_session(cfg)
    try:
        with RebuildProgress(plan, err if as_json else out) as progress:
            state = rebuild.run(spark, cfg, plan, keep_old=keep_old, cb=progress.callbacks(), stop=stop,
                                accept_dead_letters=accept_dead_letters)
    except Interrupted as exc:
        say(f"rebuild {plan.rebuild_id} stopped {exc.where}; readers still use the current generation. "
            f"Resume with `{again}` (it continues where it stopped)")
        spark.stop()
        return
    summary = state.summary
    verdict = state.dead_letters or {}
    switched = verdict.get("switch", True)
    if as_json:
        print_json({"plan": plan.as_json(), "notes": notes, "summary": summary, "dead_letters": verdict})
    else:
        bulk, catchup = summary.get("bulk", {}), summary.get("catchup", {})
        end = (f"old generation {summary.get('old_generation')}" if switched
               else "not switched: fresh generation dropped, readers keep the old one")
        say(f"rebuild {plan.rebuild_id} {'done' if switched else 'refused'}: bulk {bulk.get('records', 0):,} records "
            f"in {bulk.get('seconds', 0)} s ({bulk.get('survivors', 0):,} keys written, {bulk.get('dead_letters', 0)} "
            f"dead letters); catch-up {catchup.get('records', 0):,} records by the {catchup.get('by', 'rebuild')} "
            f"({catchup.get('search_stale', 0) + catchup.get('cache_stale', 0):,} already newer, "
            f"{catchup.get('dead_letters', 0)} dead letters); {end}")
        if "documents" in summary:
            docs = summary["documents"]
            say(f"documents: {docs.get('records', 0):,} records folded into {docs.get('documents', 0):,} document "
                f"writes in {docs.get('seconds', 0)} s ({docs.get('dead_letters', 0)} dead letters)")
        if bulk.get("unresolved_toast"):
            say(f"warning: {bulk['unresolved_toast']} keys had unchanged TOAST columns whose value neither the log "
                "nor Postgres holds now (rows deleted or re-keyed since: their deletes follow in the log)")
        note = rebuild_letters.accepted_note(verdict) if switched else None
        if note:
            say(f"warning: {note}")
    if not switched:
        raise DeadLettersLeft(rebuild_letters.refusal(plan.rebuild_id, verdict, again))


def show_plan(console: Console, plan, notes: list[str]) -> None:
    """The plan as a table: each partition's offsets, the generations written and switched."""
    action = f"resuming rebuild {plan.rebuild_id} at phase '{plan.resumed_phase}'" if plan.resumed_phase \
        else f"rebuild {plan.rebuild_id}"
    print_masked(console, f"{action}: {', '.join(plan.stores)}; {plan.records:,} records from {len(plan.topics)} topic(s), "
                          f"estimated {plan.estimate_s:,.0f} s")
    table = Table("topic", "partition", "from offset", "to offset")
    for topic, parts in plan.end.items():
        for p, end in parts.items():
            table.add_row(topic, p, str(plan.begin.get(topic, {}).get(p, 0)), str(end))
    console.print(table)
    for name, s in plan.search.items():
        print_masked(console, f"search {name}: alias {s['alias']} {s['current'] or '(none)'} -> {s['target']}")
    if plan.cache:
        print_masked(console, f"cache: fill database {plan.cache['spare_db']}, then SWAPDB with {plan.cache['live_db']}")
    if plan.documents:
        print_masked(console, f"documents: built anew from the earliest offsets into state {plan.documents['folder']}, "
                              "which the running job takes over at the switch")
    for note in notes:
        print_masked(console, f"note: {note}")


class RebuildProgress:
    """Progress: a bar per partition for the bulk replay (read, then written) on a terminal, plain
    lines elsewhere (pipelines/cli/progress_view.py); a line per phase."""

    def __init__(self, plan, console):
        from pipelines.cli.progress_view import ProgressView

        self.plan = plan
        self.view = ProgressView(console)

    def __enter__(self):
        self.view.__enter__()
        for topic, parts in self.plan.end.items():
            for p, end in parts.items():
                total = max(int(end) - int(self.plan.begin.get(topic, {}).get(p, 0)), 1)
                self.view.add(f"{topic}-{p}", total)
        return self

    def __exit__(self, *exc):
        return self.view.__exit__(*exc)

    def callbacks(self):
        from pipelines.rebuild.phases import Callbacks

        def bulk(progress: dict) -> None:
            for name, p in progress.items():
                if name in self.view.tasks:
                    applied = f" ({p.get('applied', 0):,}/{p.get('survivors', 0):,} keys written)" \
                        if p.get("applied") else ""
                    self.view.update(name, p.get("read", 0), description=f"replay {name}{applied}")

        return Callbacks(phase=self.view.phase, bulk_progress=bulk)
