"""What the stores apply: one decoded change to one row, with its version."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple


class Version(NamedTuple):
    """Orders changes to one key by their place in Postgres' commit order (see `version_of` in connectors/envelope.py).

    epoch: a WAL position all earlier-committed changes to the key are below;
    kind:  0 for a snapshot read, 1 for a streamed change (a streamed change beats a read at the same epoch);
    lsn:   the change's own WAL position, ordering changes inside one transaction.
    """

    epoch: int
    kind: int
    lsn: int

    def redis(self) -> str:
        # Fixed-width digits: string order is tuple order, and Lua compares strings exactly.
        return f"{self.epoch:020d}{self.kind}{self.lsn:020d}"

    def external(self) -> int:
        # Search engines take one signed 64-bit version, too narrow for the lsn as well (WAL
        # positions are 64-bit): changes to one key from one transaction share it, and
        # `external_gte` lets the later of them overwrite. Every path applies one key's changes in
        # offset order (one partition per key), except three, and none leaves an older change of
        # a transaction in place: a redelivery re-sends the rest of the transaction after it, the
        # rebuild's catch-up and the live dual write both go on to the key's newest change, and
        # `dlq replay` applies the key's newest record instead of the letter (pipelines/ops/dead_letter_replay.py).
        return (self.epoch << 1) | self.kind


@dataclass(frozen=True, slots=True)
class Position:
    topic: str
    partition: int
    offset: int


@dataclass(slots=True)
class Change:
    table: str                      # schema.table
    op: str                         # "upsert" | "delete" | "truncate"
    key: dict[str, Any]             # key columns -> values (empty for truncate)
    doc_id: str                     # stable id built from the key ("" for truncate)
    row: dict[str, Any] | None      # the new row for upserts
    version: Version
    position: Position
    unavailable: tuple[str, ...] = ()   # unchanged TOAST columns: keep the stored value
    source_ts_ms: int | None = None
    snapshot: bool = False
    snapshot_last: bool = False         # Debezium's marker on the initial snapshot's final record
    tombstone: bool = False             # a delete known only from its tombstone (see derived/reduce.py)
    created: bool = False               # a streamed create (op=c): no store holds an older row of this key
    reread: bool = False                # its unavailable columns are read from Postgres whatever a store holds
    hidden: tuple[str, ...] = ()        # the stores whose row filter leaves this row out: a delete there


# The version of a tombstone-only delete: unknown (the stores delete whatever they hold).
UNKNOWN = Version(0, 0, 0)


@dataclass(slots=True)
class DeadLetter:
    position: Position
    key: bytes | None
    value: bytes | None
    stage: str     # "decode" | "apply"
    reason: str
    extra: dict[str, str] = field(default_factory=dict)
