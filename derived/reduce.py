"""Per-batch reduction: the last change per key, by version (never by arrival order)."""
from __future__ import annotations

from typing import Iterable

from derived.change import Change


def last_per_key(changes: Iterable[Change]) -> tuple[list[Change], list[Change]]:
    """(truncates, latest change per (table, doc_id)). Ties keep the later offset, which is the
    later change within one transaction for the same key (same partition, produced in order)."""
    latest: dict[tuple[str, str], Change] = {}
    truncates: list[Change] = []
    for change in changes:
        if change.op == "truncate":
            truncates.append(change)
            continue
        k = (change.table, change.doc_id)
        held = latest.get(k)
        if held is None or change.version >= held.version:
            if held is not None and change.unavailable and held.op == "upsert":
                # TOAST: an unchanged column is absent from the newer change; take it from the older one.
                kept = {c: held.row[c] for c in change.unavailable if c in held.row}
                change.row = {**kept, **change.row}
                change.unavailable = tuple(c for c in change.unavailable if c not in kept)
            latest[k] = change
    return truncates, list(latest.values())
