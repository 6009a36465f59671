"""Per-batch reduction: the last change per key, by version (never by arrival order)."""
from __future__ import annotations

from typing import Iterable

from derived.change import Change


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


def _fill_unavailable(newer: Change, older: Change) -> None:
    """TOAST: an unchanged column is absent from the newer change; take it from the older one."""
    if not newer.unavailable or older.op != "upsert" or newer.op != "upsert":
        return
    kept = {c: older.row[c] for c in newer.unavailable if c in older.row}
    newer.row = {**kept, **newer.row}
    newer.unavailable = tuple(c for c in newer.unavailable if c not in kept)
