"""Whole transactions into the nested documents' fold (issue #38.9).

A micro-batch ends at whatever offsets each partition had reached when it was planned. A
transaction that changed two lines of one order lands in two partitions, and one of them can be
read a batch later: folded as it comes, the order's document showed one line changed and not the
other, a state the database never had. The gate holds a transaction's streamed records until all
of them have been read, then lets it through in commit order:

- the count per table comes from Debezium's END record (connectors/transactions.py); the
  transaction topic has one partition, so its ENDs come in commit order;
- a transaction goes through once every table's count is met, and only after every transaction
  that committed before it went through (a later one that reached its count first waits: folding
  it first would show its changes without the earlier one's);
- a tombstone follows the record before it in its partition (its delete) when that one is held;
- records without a transaction (snapshot reads, records produced before the metadata was on)
  pass at once: the model orders them by version.

What never completes is let through late, not held for good: a record compacted away before it was
read (the job far behind: a later record of its key replaces it), an END never read (the
transaction topic lost). "Late" is measured on the records' own timestamps, not the clock, so a batch
run again after a crash decides the same: a transaction passes once a record `LATE_MS` newer than
its END (or, without END, its first record) has been read in every partition still being read
(`_record_time`). Heartbeats write a transaction every `heartbeat_interval_ms`, so this time moves on
an idle database too."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from connectors.envelope import IN_OFFSET_ORDER
from connectors.transactions import transaction_end, transaction_of

LATE_MS = 10_000   # far above a record's time in flight (milliseconds; seconds in a broker hiccup)
RECENT = 4_096    # ids of transactions let through, to drop an END read after its records went through late


@dataclass
class _Held:
    first_ms: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    seen: dict[str, int] = field(default_factory=dict)     # topic -> records read


@dataclass
class _End:
    id: str
    counts: dict[str, int]                                  # topic -> records expected
    ts_ms: int


@dataclass
class GateStats:
    held: int = 0            # records held after this batch
    late: int = 0            # transactions let through incomplete (see the module's docstring)
    example: str = ""        # the first of them: what it lacked


@dataclass
class TransactionGate:
    topic_prefix: str
    gated: frozenset[str]                                    # the topics whose records wait for their transaction
    transaction_topic: str
    held: dict[str, _Held] = field(default_factory=dict)
    ends: list[_End] = field(default_factory=list)           # in commit order, not yet let through
    last_held: dict[tuple[str, int], str] = field(default_factory=dict)   # partition -> its newest held record's transaction
    recent: dict[str, None] = field(default_factory=dict)  # insertion-ordered: the oldest go first
    now_ms: int = 0                                          # record time read so far (see _record_time)

    def admit(self, rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], GateStats]:
        """The records to fold now: this batch's and earlier held ones whose transactions are whole."""
        out: list[dict[str, Any]] = []
        stats = GateStats()
        self.now_ms = max(self.now_ms, _record_time(rows, self.gated, self.transaction_topic))
        for r in sorted(rows, key=IN_OFFSET_ORDER):
            topic = r["topic"]
            if topic == self.transaction_topic:
                self._end(r["value"])
                continue
            if topic not in self.gated:
                out.append(r)
                continue
            part = (topic, r["partition"])
            if r["value"] is None:          # a tombstone: with its delete, if that one waits
                tx = self.last_held.get(part)
                if tx is not None and tx in self.held:
                    self.held[tx].rows.append(r)
                else:
                    out.append(r)
                continue
            tx = transaction_of(r["value"])
            if tx is None or tx in self.recent:
                out.append(r)
                continue
            held = self.held.get(tx)
            if held is None:
                held = self.held[tx] = _Held(int(r.get("timestamp") or 0) or self.now_ms)
            held.rows.append(r)
            held.seen[topic] = held.seen.get(topic, 0) + 1
            self.last_held[part] = tx
        out.extend(self._release(stats))
        stats.held = sum(len(h.rows) for h in self.held.values())
        return out, stats

    def holding(self) -> dict[str, dict[str, int]]:
        """Per topic and partition, the lowest offset held: the records from there on are not all folded."""
        out: dict[str, dict[str, int]] = {}
        for held in self.held.values():
            for r in held.rows:
                parts = out.setdefault(r["topic"], {})
                p = str(r["partition"])
                parts[p] = min(parts.get(p, r["offset"]), int(r["offset"]))
        return out

    def _end(self, value: bytes | None) -> None:
        end = transaction_end(value)
        if end is None or end.id in self.recent:
            return
        counts = {t: n for dc, n in end.counts.items() if (t := f"{self.topic_prefix}.{dc}") in self.gated and n}
        if counts:
            self.ends.append(_End(end.id, counts, end.ts_ms or self.now_ms))

    def _release(self, stats: GateStats) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while self.ends:                      # whole transactions, in commit order
            end = self.ends[0]
            held = self.held.get(end.id)
            whole = held is not None and all(held.seen.get(t, 0) >= n for t, n in end.counts.items())
            if not whole and self.now_ms - end.ts_ms < LATE_MS:
                break
            if not whole:
                stats.late += 1
                stats.example = stats.example or (
                    f"transaction {end.id}: " + ", ".join(f"{t} {held.seen.get(t, 0) if held else 0} of {n}"
                                                          for t, n in end.counts.items()))
            self.ends.pop(0)
            out.extend(self._let_through(end.id))
        waiting = {e.id for e in self.ends}
        for tx in [tx for tx, h in self.held.items() if tx not in waiting and self.now_ms - h.first_ms >= LATE_MS]:
            stats.late += 1                   # records whose END was never read
            stats.example = stats.example or f"transaction {tx}: no END record read"
            out.extend(self._let_through(tx))
        return out

    def _let_through(self, tx: str) -> list[dict[str, Any]]:
        held = self.held.pop(tx, None)
        self.recent[tx] = None
        while len(self.recent) > RECENT:
            del self.recent[next(iter(self.recent))]
        return held.rows if held is not None else []


def _record_time(rows: list[dict[str, Any]], gated: frozenset[str], transaction_topic: str) -> int:
    """How far in record time every partition still being read has come: the lowest, over the gated
    partitions in this batch, of the newest timestamp each brought. A partition with records left
    to read brings some to every batch (Spark's rate limit gives each at least one), so a record
    not read yet sits in a partition whose time is below it: no transaction is let through late
    while its records are merely behind (the transaction topic, a few records per transaction, runs
    ahead of the tables' topics while a backlog is read). A batch of no table records (all read):
    the transaction topic's time, which heartbeats move on."""
    newest: dict[tuple[str, int], int] = {}
    ends = 0
    for r in rows:
        ts = int(r.get("timestamp") or 0)
        if r["topic"] in gated:
            part = (r["topic"], r["partition"])
            newest[part] = max(newest.get(part, 0), ts)
        elif r["topic"] == transaction_topic:
            ends = max(ends, ts)
    return min(newest.values()) if newest else ends
