"""The two signals of `cdckit status`'s dead-letter and store-count rules as the running pipeline's
metrics (compose/monitoring/alerts.yml alerts on them): letters no `cdckit dlq replay` has settled,
per table, and each store's entries beside Postgres' row estimate. Probes of the source poller
(pipelines/spark/source_health.py): a failure only leaves the gauges as they were.
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable

from pipelines.config import Config
from pipelines.status_rules import pending_by_table

STORE_POLL_S = 60.0      # store counts: enough for an alert that waits 15 minutes
LETTERS_READ_LIMIT = 500_000


class PendingLetters:
    """Unsettled letters per table, counted on from where the last poll stopped: after the first
    poll only new letters are read. A moved mark or a recreated topic starts again from the mark."""

    def __init__(self, conf: dict[str, Any], topic: str, checkpoint_dir, table_of: Callable[[str], str | None]):
        self.conf, self.topic, self.checkpoint_dir, self.table_of = conf, topic, checkpoint_dir, table_of
        self.tally = None

    def __call__(self) -> dict[str, int]:
        from connectors.kafka.dead_letter_topic import tally_letters, topic_end
        from pipelines.state.letters_settled import pending_from, settled_offset

        end = topic_end(self.conf, self.topic)
        start = pending_from(settled_offset(self.checkpoint_dir), end)
        if self.tally is not None and (self.tally.start != start or end < self.tally.position):
            self.tally = None
        self.tally = tally_letters(self.conf, self.topic, start, end, LETTERS_READ_LIMIT, self.tally)
        pending = pending_by_table(self.tally.per_topic, self.tally.first_reason, self.table_of)
        return {name: n for name, (n, _) in pending.items()}


def store_counts(config: Config, stores, connect: Callable[[], Any]) -> dict[str, dict[str, float | None]]:
    """table (and nested document, against its root table's rows) -> rows_estimate, search, cache."""
    estimates: dict[str, float | None] = {}
    with connect() as conn:
        for t in config.tables:   # a documents-only root too: its documents are counted against it
            if t.filtered:   # its stores hold the rows a filter keeps: `status` counts those (NaN here)
                estimates[t.name] = None
                continue
            est = conn.execute("SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(%s)", (t.name,)).fetchone()
            estimates[t.name] = float(est[0]) if est and est[0] is not None and est[0] >= 0 else None
    out: dict[str, dict[str, float | None]] = {t.name: {"rows_estimate": estimates[t.name]} for t in config.flat_tables}
    for d in config.documents:
        out[d.store_table] = {"rows_estimate": estimates.get(d.root)}
    for name, row in out.items():
        if "search" in config.sinks:
            row["search"] = stores.search.count(stores.search_tables[name])
        if "cache" in config.sinks:
            row["cache"] = stores.cache.count(stores.cache_tables[name])
    return out


def throttled(probe: Callable[[], Any], every_s: float, clock: Callable[[], float] = time.monotonic
              ) -> Callable[[], Any]:
    """The probe at most every `every_s` (None in between: the poller leaves the gauges)."""
    last = [-math.inf]

    def run():
        if clock() - last[0] < every_s:
            return None
        last[0] = clock()
        return probe()

    return run
