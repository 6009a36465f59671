"""How far apart the tables' micro-batches start: the trigger's interval while changes are few,
a longer one under load (`spark.trigger_under_load`, issue #40).

A micro-batch has a fixed cost besides its changes' (planning, the offset and commit logs, the
job's scheduling: ~110-140 ms of CPU on a 2-core machine, benchmarks/cpu_per_change.py), paid at
every trigger. At 500 ms and 2,000 changes/s that fixed cost was most of cdckit's CPU, 1.5x
Debezium's per change; spaced ~1 s apart under the same load, 0.95x, a change visible up to ~0.6 s
later (p99 ~1.5 s instead of ~1 s). Few changes keep the trigger's interval: their freshness is
what a cost per batch buys. The load is counted in Kafka records (a delete is two, with its
tombstone), and it holds until the rate falls below 80 % of `load_rate`, so it does not flip at
every batch at about that rate.

Spark's processing-time trigger cannot change its interval while a query runs, so the space is
made by the batch itself: once its writes are done (and its stats, status and metrics recorded),
a batch under load waits before it returns, until `under_load_s` after it began. Spark starts the
next batch at once then (its next start was due one interval after this one's: past, so no wait;
with `--verbose` Spark says the batch is "falling behind"). Whatever arrives meanwhile goes into
that next batch. The wait holds back the batch's commit, not its writes:
the stores hold its changes already; read-your-writes positions advance at the commits, up to
`under_load_s` apart under load. A batch cut short by `max_offsets_per_trigger` is a backlog's:
it never waits (that would only slow the catch-up).

Pure: the clock is the caller's."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class BatchCadence:
    trigger_s: float            # the query's processing-time interval
    under_load_s: float         # batches start this far apart under load (<= trigger_s: never wait)
    load_rate: float            # records per second from which the load counts
    max_records: int | None = None   # spark.max_offsets_per_trigger: a batch this full is a backlog's
    rate: float = 0.0           # the last batch's, for the log line when the load comes or goes
    _last_start: float | None = None
    _loaded: bool = False

    RELEASE = 0.8   # under load until the rate falls below this share of load_rate: no flapping at it

    @property
    def loaded(self) -> bool:
        return self._loaded

    def wait_after(self, records: int, started: float, now: float) -> float:
        """Seconds for a batch that began at `started` (the driver's clock) with `records`
        records to wait before it returns, at `now`. The rate is the batch's records over the
        time since the previous batch began: what arrived while that one ran and waited."""
        previous, self._last_start = self._last_start, started
        if previous is None or self.under_load_s <= self.trigger_s or started <= previous:
            return 0.0   # the first batch (a backlog's, maybe) has no rate to judge by
        if self.max_records is not None and records >= 0.9 * self.max_records:
            return 0.0   # capped: the rate is the pipeline's own, not the arrivals'
        self.rate = records / (started - previous)
        self._loaded = self.rate >= self.load_rate * (self.RELEASE if self._loaded else 1.0)
        if not self._loaded:
            return 0.0
        return max(0.0, started + self.under_load_s - now)
