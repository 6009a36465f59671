"""`cdckit verify` and `cdckit status`: how the stores and the pipeline stand."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.table import Table

from pipelines.cli.base import app, config_option, cut, json_option, load, out, say, say_error


@app.command("verify")
@config_option
@click.option("--table", "table", default=None, help="only this schema.table, or this document (its name)")
@click.option("--sample", type=int, default=None, help="compare N random rows instead of all")
@click.option("--timeout", "timeout_s", type=float, default=120, show_default=True,
              help="seconds to wait for the pipeline to catch up with the database")
@json_option
def verify_command(config_path: Path, table: str | None, sample: int | None, timeout_s: float, as_json: bool) -> None:
    """Compare Postgres with both stores once the pipeline has caught up. Exit 1 on any difference."""
    from pipelines.ops import verify_tables

    cfg = load(config_path)
    try:
        report = verify_tables.verify(cfg, table=table, sample=sample, timeout_s=timeout_s)
    except verify_tables.NotCaughtUp as exc:
        say_error(str(exc))
        sys.exit(3)
    if as_json:
        say(json.dumps(report.as_json(), indent=2, default=str))
    else:
        show_verify(report)
    sys.exit(0 if report.exact else 1)


@app.command("status")
@config_option
@json_option
@click.option("--exact", is_flag=True, help="exact row/document/key counts (scans; slower)")
@click.option("--watch", is_flag=True, help="a live view of the running pipeline, refreshed until Ctrl-C")
@click.option("--interval", "interval_s", type=click.FloatRange(min=0.2), default=2.0, show_default=True,
              help="seconds between refreshes of --watch")
@click.option("--metrics-url", default=None,
              help="the pipeline's metrics endpoint for --watch (default: metrics_host:metrics_port of the config)")
def status_command(config_path: Path, as_json: bool, exact: bool, watch: bool, interval_s: float,
                   metrics_url: str | None) -> None:
    """Connector, slot, topics, pipeline and stores as they are now. Exit 1 when unhealthy."""
    from pipelines.ops import status

    cfg = load(config_path)
    if watch:
        sys.exit(_watch(cfg, interval_s, metrics_url, as_json or exact))
    report = status.collect(cfg, exact=exact)
    if as_json:
        say(json.dumps(report.as_json(), indent=2, default=str))
    else:
        show_status(report)
    sys.exit(0 if report.healthy else 1)


def _watch(cfg, interval_s: float, metrics_url: str | None, other_flags: bool) -> int:
    from pipelines.cli.status_watch import watch
    from pipelines.ops.watch_feed import Feed, metrics_url as config_url, shown_url

    if other_flags:
        raise click.UsageError("--watch shows a live view: it takes neither --json nor --exact")
    url = metrics_url or config_url(cfg)
    if url is None:
        raise click.UsageError("the config turns the metrics off (metrics_port: 0): pass --metrics-url")
    return watch(Feed(cfg, url), out, interval_s, shown_url(url))


def show_verify(report) -> None:
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
                say(f"  different {item.get('id', '-')} field {item['field']}: postgres {cut(item.get('postgres'))}, "
                    f"store {cut(item.get('store'))}")
    say("exact" if report.exact else "DIFFERENCES FOUND")


def show_status(report) -> None:
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
    rows = Table("table", "postgres", "search docs", "cache keys", "dead letters")
    for name, t in report.tables.items():
        pg = t.get("postgres_rows", t.get("postgres_rows_estimate"))
        rows.add_row(name, "-" if pg is None else (f"{pg}" if "postgres_rows" in t else f"~{pg}"),
                     *(["(documents only)", "-"] if t.get("documents_only") else
                       [str(t.get("search_docs", "-")), str(t.get("cache_keys", "-"))]),
                     str(t.get("dead_letters_pending", 0)))   # not settled by a `dlq replay`
    out.print(rows)
    for w in report.warnings:
        say(f"warning: {w}")
    for problem in report.problems:
        say(f"UNHEALTHY: {problem}")
    say("healthy" if report.healthy else "unhealthy")
