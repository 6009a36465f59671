"""What the CLI prints: every line for people goes through `say` (secret values masked, no rich
markup); `--json` output is one masked document on stdout; tables for status and dead letters."""
from __future__ import annotations

import hashlib
import json

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pipelines.secrets import mask, print_masked

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def say(text: str) -> None:
    print_masked(out, text)


def say_error(text: str) -> None:
    print_masked(err, f"error: {text}")


def print_json(body) -> None:
    """One JSON document on stdout (progress went to stderr), masked like everything printed."""
    print(mask(json.dumps(body)), flush=True)


def cut(value, limit: int = 120) -> str:
    """A value for one line of human output: long ones cut, with their length and a hash to tell
    two apart (`--json` keeps them whole)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return f"{text[:limit]}... ({len(text):,} chars, sha256 {digest})"


def show_letters(letters, limit: int, topic: str) -> None:
    table = Table("offset", "source", "stage", "reason")
    for x in letters[:limit]:
        j = x.as_json()
        # escape: engines' reasons name fields in brackets ("mapper [j.n] cannot be changed"), which
        # rich would take for markup and drop.
        table.add_row(str(x.offset), escape(j["source"]), x.stage, escape(x.reason[:160]))
    out.print(table)
    say(f"{len(letters)} dead letter(s) in {topic}" + (f" (first {limit} shown)" if len(letters) > limit else ""))


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
