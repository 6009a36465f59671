"""`cdckit status --watch`, the pure part: a scrape of the pipeline's metrics endpoint parsed, rates
between two scrapes, and the view model the CLI draws (no I/O, no rich: pipelines/ops/watch_feed.py
fetches, pipelines/cli/status_watch.py draws).

Whatever the metrics do not say (an older pipeline, a metric not yet set) comes from the feed's
direct answers (`Fetched`): Kafka for the lag, Connect and Postgres for the connector and slot."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

Labels = tuple[tuple[str, str], ...]
TASK_STATES = ("RUNNING", "FAILED", "PAUSED", "UNASSIGNED")


@dataclass(frozen=True)
class Scrape:
    at: float                                      # when it was taken (seconds, the watcher's clock)
    samples: dict[str, dict[Labels, float]]        # sample name (with _total) -> labels -> value

    def value(self, name: str, **labels: str) -> float | None:
        return self.samples.get(name, {}).get(tuple(sorted(labels.items())))

    def by(self, name: str, label: str) -> dict[str, float]:
        """One label's values of a metric: {label value: value}."""
        return {dict(labels)[label]: v for labels, v in self.samples.get(name, {}).items() if label in dict(labels)}


def parse_scrape(text: str, at: float) -> Scrape:
    from prometheus_client.parser import text_string_to_metric_families

    samples: dict[str, dict[Labels, float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return Scrape(at, samples)


def rates(prev: Scrape | None, cur: Scrape, name: str, label: str) -> dict[str, float]:
    """Per-second increase of a counter between two scrapes, per label value. A counter that went
    down was reset (the pipeline restarted): its whole current value is the increase."""
    if prev is None or cur.at <= prev.at:
        return {}
    before, after = prev.by(name, label), cur.by(name, label)
    return {k: (v - before.get(k, 0.0) if v >= before.get(k, 0.0) else v) / (cur.at - prev.at)
            for k, v in after.items()}


@dataclass
class Connector:
    running: bool | None                  # None: unknown
    tasks: dict[str, int] = field(default_factory=dict)
    state: str | None = None              # Connect's own word, when asked directly
    source: str = "metrics"


@dataclass
class Slot:
    active: bool | None
    lag_bytes: float | None = None
    retained_bytes: float | None = None
    exists: bool = True
    source: str = "metrics"


@dataclass
class Fetched:
    """What the feed found besides the scrape."""

    error: str | None = None                               # the metrics endpoint did not answer
    counts: dict[str, dict[str, int | None]] = field(default_factory=dict)  # table -> search_docs/cache_keys
    kafka_lag: dict[str, int] = field(default_factory=dict)                 # table -> records (fallback)
    connector: Connector | None = None                     # asked directly (fallback)
    slot: Slot | None = None
    problems: list[str] = field(default_factory=list)


@dataclass
class TableRow:
    table: str
    events_per_s: float | None = None
    lag: int | None = None
    freshness_s: float | None = None
    dead_letters: int | None = None
    search_docs: int | None = None
    cache_keys: int | None = None


@dataclass
class Bar:
    label: str
    done: float
    total: float


@dataclass
class View:
    tables: list[TableRow]
    connector: Connector | None = None
    slot: Slot | None = None
    bars: list[Bar] = field(default_factory=list)
    last_batch_age_s: float | None = None
    error: str | None = None
    problems: list[str] = field(default_factory=list)


def missing_lag(scrape: Scrape | None, topics: dict[str, str]) -> list[str]:
    """Tables (of {table: topic}) whose lag the metrics do not give."""
    have = scrape.by("cdckit_lag_records", "topic") if scrape else {}
    return [t for t, topic in topics.items() if topic not in have]


def connector_from(scrape: Scrape | None) -> Connector | None:
    running = scrape.value("cdckit_connector_running") if scrape else None
    if running is None:
        return None
    tasks = {s: int(v) for s, v in scrape.by("cdckit_connector_tasks", "state").items()}
    return Connector(running == 1, {s: tasks.get(s, 0) for s in TASK_STATES})


def slot_from(scrape: Scrape | None) -> Slot | None:
    active = scrape.value("cdckit_slot_active") if scrape else None
    if active is None:
        return None
    return Slot(active == 1, _known(scrape.value("cdckit_slot_lag_bytes")),
                _known(scrape.value("cdckit_slot_retained_bytes")))


def build_view(cur: Scrape | None, prev: Scrape | None, topics: dict[str, str], fetched: Fetched,
               now: float) -> View:
    """`topics`: {table: topic} of the config, in its order; tables the metrics name beyond them
    (a pipeline with a newer config) follow. `now`: wall-clock time, for the last batch's age."""
    tables = list(topics)
    scraped = cur.by("cdckit_table_records_total", "table") if cur else {}
    tables += sorted(t for t in scraped if t not in topics)
    per_s = rates(prev, cur, "cdckit_table_records_total", "table") if cur else {}
    lag = cur.by("cdckit_lag_records", "topic") if cur else {}
    fresh = cur.by("cdckit_table_freshness_seconds", "table") if cur else {}
    dead = cur.by("cdckit_table_dead_letters_total", "table") if cur else {}
    rows = []
    for t in tables:
        topic = topics.get(t)
        row = TableRow(t)
        if cur is not None:
            row.events_per_s = per_s.get(t, 0.0) if prev is not None else None
            row.dead_letters = int(dead.get(t, 0))
            row.freshness_s = fresh.get(t)
        row.lag = int(lag[topic]) if topic in lag else fetched.kafka_lag.get(t)
        counts = fetched.counts.get(t, {})
        row.search_docs, row.cache_keys = counts.get("search_docs"), counts.get("cache_keys")
        rows.append(row)
    last = cur.value("cdckit_last_batch_timestamp_seconds") if cur else None
    return View(rows, connector_from(cur) or fetched.connector, slot_from(cur) or fetched.slot, bars(cur),
                max(0.0, now - last) if last else None, fetched.error, list(fetched.problems))


def bars(scrape: Scrape | None) -> list[Bar]:
    """A snapshot's tables still being read, and a rebuild in progress."""
    if scrape is None:
        return []
    found = []
    read = scrape.by("cdckit_snapshot_rows_read", "table")
    for table, total in sorted(scrape.by("cdckit_snapshot_rows_total", "table").items()):
        if total > 0 and read.get(table, 0) < total:
            found.append(Bar(f"snapshot {table}", read.get(table, 0), total))
    if scrape.value("cdckit_rebuild_active") == 1:
        found.append(Bar("rebuild", scrape.value("cdckit_rebuild_records_done") or 0,
                         scrape.value("cdckit_rebuild_records_total") or 0))
    return found


def _known(v: float | None) -> float | None:
    return None if v is None or math.isnan(v) else v


# Formatting shared by the live table and the plain lines.

def fmt_int(v: float | None) -> str:
    return "-" if v is None else f"{int(v):,}"


def fmt_rate(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f}"


def fmt_age(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s:.1f} s" if s < 60 else f"{s / 60:.0f} min" if s < 3600 else f"{s / 3600:.1f} h"


def fmt_bytes(v: float | None) -> str:
    if v is None:
        return "?"
    for unit in ("B", "kB", "MB", "GB"):
        if abs(v) < 1024 or unit == "GB":
            return f"{v:,.0f} {unit}" if unit == "B" else f"{v:,.1f} {unit}"
        v /= 1024
    return f"{v:,.1f} GB"


def connector_text(c: Connector | None) -> str:
    if c is None:
        return "connector ?"
    if c.running is None:
        return f"connector {c.state or 'unknown'}"
    word = c.state or ("RUNNING" if c.running else "NOT RUNNING")
    tasks = ", ".join(f"{n} {s}" for s, n in c.tasks.items() if n) or "no tasks"
    return f"connector {word} ({tasks})"


def slot_text(s: Slot | None) -> str:
    if s is None:
        return "slot ?"
    if not s.exists:
        return "slot MISSING"
    if s.active is None:
        return "slot unknown"
    return (f"slot {'active' if s.active else 'INACTIVE'}, lag {fmt_bytes(s.lag_bytes)}, "
            f"retained {fmt_bytes(s.retained_bytes)}")


def bar_text(b: Bar) -> str:
    share = f" {100 * min(b.done, b.total) / b.total:.0f}%" if b.total else ""
    return f"{b.label} {fmt_int(b.done)}/{fmt_int(b.total)}{share}"


def plain_line(view: View) -> str:
    """One line per refresh, for logs (stdout not a terminal)."""
    if view.error:
        head = view.error
    else:
        head = f"last batch {fmt_age(view.last_batch_age_s)} ago"
    tables = "; ".join(
        f"{r.table} {fmt_rate(r.events_per_s)} ev/s lag {fmt_int(r.lag)} fresh {fmt_age(r.freshness_s)} "
        f"dlq {fmt_int(r.dead_letters)} search {fmt_int(r.search_docs)} cache {fmt_int(r.cache_keys)}"
        for r in view.tables)
    parts = [head, tables, connector_text(view.connector), slot_text(view.slot)] + [bar_text(b) for b in view.bars] \
        + [f"warning: {p}" for p in view.problems]
    return " | ".join(p for p in parts if p)
