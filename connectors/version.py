"""A per-key version from Debezium's `source` block that follows Postgres' commit order.

Why not the Kafka offset: offsets restart on a recreated topic and repeat after a Connect crash.
Why not the change's own `lsn`: a transaction that began before the slot's consistent point and
committed after it is streamed (the snapshot did not see it), yet its changes can sit at WAL
positions below the snapshot's `lsn`; ordering by `lsn` would let the older snapshot read win.

What the fields give (Postgres, pgoutput):
- snapshot reads carry `lsn` = L0, the slot's consistent point; `sequence` = [P, L0] where P is the
  last commit Debezium had processed (null for the initial snapshot).
- a streamed change carries `sequence` = [P, lsn], P = end of the commit of the transaction
  streamed before it; null only for the first transaction after a snapshot without prior offsets.

The version is (epoch, kind, lsn):
- streamed with P: epoch = P. Two transactions touching the same row are serialised by its row
  lock, so the later one commits after the earlier one's commit: P(later) >= commit(earlier) >
  P(earlier). Every transaction streamed after a snapshot at L0 commits after L0, so P >= L0.
- snapshot read: epoch = P if present (a blocking/incremental snapshot taken mid-stream) else L0,
  kind 0, so any change streamed after it at the same epoch (kind 1) wins. Incremental-snapshot
  reads have no `lsn` (`sequence` = [P, P]): they are emitted when a chunk's window closes, P being
  the last commit processed then; Debezium drops a read whose key changed inside the window, so
  every change committed before P is older than the read and every change streamed after it
  carries a P' >= P with kind 1.
- streamed without P (the first transaction after a snapshot): it commits after L0, so
  epoch = max(lsn, fence), where `fence` is the highest snapshot `lsn` seen earlier in the same
  topic partition. Its key's snapshot read, if any, is in the same partition at a lower offset,
  so the fence covers exactly the case above; the next transaction's P exceeds this commit, so
  it still sorts below everything streamed after it.
"""
from __future__ import annotations

import orjson
from typing import Any

from derived.change import Version

SNAPSHOT_MARKERS = {"true", "first", "last", "first_in_data_collection", "last_in_data_collection",
                    "incremental"}


class VersionError(ValueError):
    pass


def is_snapshot(source: dict[str, Any]) -> bool:
    return str(source.get("snapshot", "false")).lower() in SNAPSHOT_MARKERS


def is_final_snapshot_record(source: dict[str, Any]) -> bool:
    """Debezium's marker on the initial snapshot's last record (the streaming query and the
    bootstrap's bulk each take it as the snapshot's end)."""
    return source.get("snapshot") == "last"


_SEQUENCES: dict[str, tuple[int | None, int | None]] = {}   # a snapshot's reads all carry one


def _sequence(source: dict[str, Any]) -> tuple[int | None, int | None]:
    seq = source.get("sequence")
    if seq is None:
        return None, None
    known = _SEQUENCES.get(seq) if isinstance(seq, str) else None
    if known is not None:
        return known
    try:
        parts = orjson.loads(seq) if isinstance(seq, str) else seq
        a, b = parts[0], parts[1]
        out = (None if a is None else int(a)), (None if b is None else int(b))
    except (orjson.JSONDecodeError, ValueError, TypeError, IndexError):
        raise VersionError(f"source.sequence is not [commit, lsn]: {seq!r}") from None
    if isinstance(seq, str):
        if len(_SEQUENCES) >= 256:
            _SEQUENCES.clear()
        _SEQUENCES[seq] = out
    return out


def previous_commit(source: dict[str, Any]) -> int | None:
    return _sequence(source)[0]


def version_of(source: dict[str, Any], fence: int = 0, snapshot: bool | None = None) -> Version:
    prev, seq_lsn = _sequence(source)
    try:
        # Incremental-snapshot reads carry no lsn of their own: `sequence` holds the stream position
        # at which the chunk was emitted (P = the last commit processed).
        lsn = int(source["lsn"]) if source.get("lsn") is not None else int(seq_lsn)
    except (TypeError, ValueError):
        raise VersionError("source.lsn is missing or not a number") from None
    if is_snapshot(source) if snapshot is None else snapshot:
        return Version(prev if prev is not None else lsn, 0, lsn)
    if prev is not None:
        return Version(prev, 1, lsn)
    return Version(max(lsn, fence), 1, lsn)
