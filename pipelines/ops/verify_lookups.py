"""`cdckit verify` of a table's Redis lookups: every set and sorted set its lookups' key patterns
match, entry by entry, against the entries the database's rows give (pipelines/ops/verify_tables.py
computes those with derived/sinks/cache/lookups.py, as the pipeline does)."""
from __future__ import annotations

from typing import Any

from derived.sinks.cache.keys import key_pattern
from derived.sinks.cache.lookups import Lookup
from pipelines.ops.verify_report import StoreDiff


def held_entries(r, lookups: tuple[Lookup, ...], diff: StoreDiff) -> dict[tuple[str, str], float | None]:
    """(set key, member) -> score (None in a set) of every entry Redis holds under the lookups'
    patterns. A key of another type is a difference of its own."""
    out: dict[tuple[str, str], float | None] = {}
    for lk in lookups:
        for raw in r.scan_iter(match=key_pattern(lk.key), count=1000):
            key = raw.decode()
            if key.startswith("cdckit:"):
                continue
            kind = r.type(raw).decode()
            if kind != lk.kind:
                diff.add("different", {"id": key, "field": "(lookup type)", "postgres": lk.kind, "store": kind})
            elif kind == "set":
                out.update(((key, m.decode()), None) for m in r.smembers(raw))
            else:
                out.update(((key, m.decode()), float(s)) for m, s in r.zrange(raw, 0, -1, withscores=True))
    return out


def compare_lookups(diff: StoreDiff, r, lookups: tuple[Lookup, ...], expected: dict[tuple[str, str], str]) -> None:
    """Each entry missing from Redis, held beyond the database's rows, or scored differently."""
    held = held_entries(r, lookups, diff)
    for (key, member), score in expected.items():
        if (key, member) not in held:
            diff.add("missing", f"{key} member {member}")
            continue
        got = held[(key, member)]
        if _score(score) != got:
            diff.add("different", {"id": f"{key} member {member}", "field": "(score)", "postgres": score,
                                   "store": got})
    for key, member in held.keys() - expected.keys():
        diff.add("extra", f"{key} member {member}")


def _score(text: str) -> Any:
    return None if text == "" else float(text)
