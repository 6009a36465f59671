"""`cdckit status --watch`: the view model (pipelines/ops/watch_view.py) drawn as a live table, or as
one plain line per refresh when stdout is not a terminal (logs)."""
from __future__ import annotations

import time
from collections import deque

from rich.console import Console, Group
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from pipelines.ops import watch_view as model
from pipelines.secrets import mask, print_masked

HISTORY = 5   # rates over the last few refreshes: batches make single intervals lumpy


def frame(view: model.View, url: str) -> Group:
    """One screen: a header line, a row per table, the connector and slot, a bar per long job."""
    head = view.error or (f"{url}: last batch {model.fmt_age(view.last_batch_age_s)} ago"
                          if view.last_batch_age_s is not None else f"{url}: no batch yet")
    table = Table()
    table.add_column("table", no_wrap=True, min_width=max((len(r.table) for r in view.tables), default=5))
    for name in ("events/s", "lag", "freshness", "dead letters", "search docs", "cache keys"):
        table.add_column(name, justify="right")
    for r in view.tables:
        table.add_row(mask(r.table), model.fmt_rate(r.events_per_s), model.fmt_int(r.lag),
                      model.fmt_age(r.freshness_s), model.fmt_int(r.dead_letters), model.fmt_int(r.search_docs),
                      model.fmt_int(r.cache_keys))
    parts: list = [Text(mask(head), style="bold red" if view.error else "bold"), table,
                   Text(mask(f"{model.connector_text(view.connector)}  |  {model.slot_text(view.slot)}"))]
    for b in view.bars:
        line = Table.grid(padding=(0, 1))
        line.add_row(ProgressBar(total=max(b.total, 1), completed=min(b.done, max(b.total, 1)), width=40),
                     Text(mask(model.bar_text(b))))
        parts.append(line)
    parts += [Text(mask(f"warning: {p}"), style="yellow") for p in view.problems]
    return Group(*parts)


def watch(feed, console: Console, interval_s: float, url: str) -> int:
    """Refresh every `interval_s` until Ctrl-C (exit 0)."""
    history: deque = deque(maxlen=HISTORY)

    def step() -> model.View:
        scrape, fetched = feed.sample()
        if scrape is not None:
            history.append(scrape)
        else:
            history.clear()  # the pipeline may restart meanwhile: no rate across the gap
        prev = history[0] if len(history) > 1 else None
        return model.build_view(scrape, prev, feed.topics, fetched, time.time())

    try:
        if console.is_terminal:
            from rich.live import Live

            with Live(console=console, auto_refresh=False, transient=False) as live:
                while True:
                    started = time.monotonic()
                    live.update(frame(step(), url), refresh=True)
                    time.sleep(max(0.0, interval_s - (time.monotonic() - started)))
        else:
            while True:
                started = time.monotonic()
                print_masked(console, f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {model.plain_line(step())}")
                time.sleep(max(0.0, interval_s - (time.monotonic() - started)))
    except KeyboardInterrupt:
        return 0
