"""Per-batch reduction: the last change per key, by version (never by arrival order)."""
from __future__ import annotations

from typing import Iterable

from dataclasses import replace

from derived.change import UNKNOWN, Change, Version


def last_per_key(changes: Iterable[Change]) -> tuple[list[Change], list[Change]]:
    """(truncates, latest change per (table, doc_id)). Ties keep the later offset, which is the
    later change within one transaction for the same key (same partition, produced in order)."""
    latest: dict[tuple[str, str], Change] = {}
    truncates = fold_into(latest, changes)
    return truncates, list(latest.values())


def fold_into(latest: dict[tuple[str, str], Change], changes: Iterable[Change]) -> list[Change]:
    """Fold changes into `latest` (key -> newest change), in place; returns the truncates."""
    truncates: list[Change] = []
    for change in changes:
        if change.op == "truncate":
            truncates.append(change)
            continue
        k = (change.table, change.doc_id)
        held = latest.get(k)
        if held is None:
            latest[k] = change
            continue
        newer, older = (change, held) if change.version >= held.version else (held, change)
        _fill_unavailable(newer, older)
        latest[k] = newer
    return truncates


def settle_tombstones(latest: list[Change], tombstones: Iterable[Change],
                      deletes_at: set[tuple[str, int, int]]) -> list[Change]:
    """The batch's tombstones against its latest changes.

    A compacted log can hold a tombstone whose op=d record the cleaner removed (a job that lags
    behind the cleaner reads such a stretch). The tombstone carries no version, but Debezium writes
    it right after its op=d record, at the next offset of the same partition. So, per tombstone:
    - a change of its key after it in this batch is newer: the tombstone is void;
    - its op=d record at the offset before it is in this batch (`deletes_at`): nothing to add;
    - otherwise (its delete compacted away, or in the previous batch): a delete of whatever the
      store holds (`UNKNOWN` version, `tombstone=True`). The stores keep the held version just below
      what they held, so a redelivered copy of that very change (Connect resends a suffix of the
      log after a crash: the old delete, its tombstone, then the newer changes again) is applied
      again, and anything older stays refused.
    Why "whatever is held" is safe: the live path applies a partition's offsets in order and a
    redelivered suffix replays its records in order too, so the last record of a key decides."""
    by_key = {(c.table, c.doc_id): c for c in latest}
    for t in tombstones:
        k = (t.table, t.doc_id)
        held = by_key.get(k)
        if held is not None and held.position.offset > t.position.offset:
            continue
        if (t.position.topic, t.position.partition, t.position.offset - 1) in deletes_at:
            continue
        by_key[k] = replace(t, version=UNKNOWN, tombstone=True)
    return list(by_key.values())


def _fill_unavailable(newer: Change, older: Change) -> None:
    """TOAST: an unchanged column is absent from the newer change; take it from the older one.
    Not a column Debezium could not render (`reread`): it changed, and is read from Postgres."""
    if not newer.unavailable or older.op != "upsert" or newer.op != "upsert" or newer.reread:
        return
    kept = {c: older.row[c] for c in newer.unavailable if c in older.row}
    newer.row = {**kept, **newer.row}
    newer.unavailable = tuple(c for c in newer.unavailable if c not in kept)
    # The key's chain began with a create here: no store holds an older row to merge the rest from.
    newer.created = newer.created or older.created


def merge_cuts(*cuts: dict[str, Version]) -> dict[str, Version]:
    """The newest truncate per table of several sets of cuts: it removes everything an older one would."""
    merged: dict[str, Version] = {}
    for one in cuts:
        for table, version in one.items():
            if table not in merged or version > merged[table]:
                merged[table] = version
    return merged
