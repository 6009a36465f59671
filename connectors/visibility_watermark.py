"""The visibility watermark: the WAL position up to which every committed change has been applied
to a store (issue #23; published by pipelines/streaming/visibility_publisher.py, read by pipelines/client.py).

Why "applied up to L" holds. A sample is (C, E): C the replication slot's `confirmed_flush_lsn`,
read first, then E the end offsets of every change topic the store is fed from. Debezium confirms
a position to the slot only after Kafka Connect committed the source offsets up to it, and Connect
commits offsets only once the producer has acknowledged every record sent before them. So every
transaction committed below C has all its records in the topics below E, in every partition at
once: no reasoning about producer order across partitions is needed, and an idle partition needs
no record of its own (the slot moves on heartbeats: Debezium's `heartbeat.action.query`). Once the
pipeline's queries have committed offsets at or past E in every partition, their batches, written
before Spark records the commit, have applied those records: L = C. Offsets only grow, so the
newest sample covered wins and the watermark never goes back.

What this rests on, and where it is held: Debezium's Postgres task confirms to the slot only what
Kafka Connect committed (it ignores `commitRecord`; `commit()` flushes the last committed offset's
LSN), and Connect commits a source partition's offsets only up to the first record the producer has
not acknowledged (its SubmittedRecords), whatever order acknowledgements arrive in. Debezium's
Postgres connector has one source partition, so one record held back holds every later position.
Shown on Kafka 4.3.1 (Connect) with Debezium 3.7.0.Final by
tests/integration/test_held_acknowledgement.py: a second broker joins the stack's cluster and leads
one table's topic; stopped (SIGSTOP) with a change of that table in flight while 20 later
transactions on the first broker are acknowledged and read, the slot's confirmed position stays
below the held commit, and passes it once the broker is back. (A refused produce is no hold there:
that broker acknowledges acks=all writes to a topic whose min.insync.replicas is above its
replication factor.) A Connect or Debezium upgrade, or another source connector, that changes
either half fails that test instead of read-your-writes silently; the property model in
tests/unit/connectors/test_visibility.py assumes the same two halves.

Not valid during the initial snapshot: its reads are not confirmed through the slot (the slot
starts at the snapshot's consistent point), so the publisher waits for the snapshot to be
committed (pipelines/streaming/visibility_publisher.py).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Mapping

Offsets = Mapping[str, Mapping[str, int]]   # topic -> partition -> offset


@dataclass(frozen=True)
class Sample:
    lsn: int
    ends: Offsets


def covered(ends: Offsets, committed: Offsets) -> bool:
    """Every partition's committed offset at or past its end in the sample (a topic without
    records needs nothing)."""
    for topic, parts in ends.items():
        done = committed.get(topic) or {}
        for part, end in parts.items():
            if int(end) > 0 and int(done.get(str(part), done.get(part, -1))) < int(end):
                return False
    return True


class Watermark:
    """Samples taken before the batches that cover them; `advance` with the committed offsets."""

    def __init__(self, max_samples: int = 2_000):
        self.samples: deque[Sample] = deque(maxlen=max_samples)
        self.lsn = 0

    def sample(self, lsn: int, ends: Offsets) -> None:
        if self.samples and self.samples[-1].lsn >= lsn and self.samples[-1].ends == ends:
            return  # nothing new since the last one
        self.samples.append(Sample(lsn, {t: dict(p) for t, p in ends.items()}))

    def advance(self, committed: Offsets) -> int:
        """The newest sample the committed offsets cover sets the watermark; it and older ones go."""
        for i in range(len(self.samples) - 1, -1, -1):
            if covered(self.samples[i].ends, committed):
                self.lsn = max(self.lsn, self.samples[i].lsn)
                for _ in range(i + 1):
                    self.samples.popleft()
                break
        return self.lsn


def parse_lsn(text: str | int) -> int:
    """A WAL position as Postgres prints it ('16/B374D848') or as an integer."""
    if isinstance(text, int):
        return text
    text = str(text).strip()
    if "/" in text:
        hi, lo = text.split("/", 1)
        return (int(hi, 16) << 32) | int(lo, 16)
    return int(text)


def format_lsn(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"
