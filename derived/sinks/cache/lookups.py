"""Redis lookup structures: per table, sets or sorted sets keyed by any column of the row (e.g.
`orders_by_customer:{customer_id}` holding order ids, scored by a column), kept exact by the cache's
versioned scripts (upsert.lua, upsert_many.lua, delete.lua, forget.lua).

A row's entries are computed here from the row as the cache receives it (typed values, after the
transform hook) and sent with its versioned write. The script records them beside the row, under
`cdckit:lk:<data key>`, and when the write passes the version check it removes the entries the row
held before and adds the new ones in the same call: a row that moves to another customer, is
deleted, truncated or filtered out leaves nothing behind, and a replay of an older change changes
nothing. `verify` computes the same entries from Postgres with the same functions.

A row whose lookup key or score column is null (or NaN) is in no set: as SQL groups no null key.
Pure: no I/O.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

from derived.calendar import days_from_civil
from derived.sinks.cache.keys import placeholders, render_key


class LookupValueError(ValueError):
    """A row's value cannot be a lookup's score (a dead letter naming the column)."""


@dataclass(frozen=True)
class Lookup:
    key: str                 # template over the row's columns: "orders_by_customer:{customer_id}"
    member: str = "{_id}"    # template of the member: the row's id by default
    score: str | None = None  # a column: a sorted set scored by it; None: a set

    @property
    def kind(self) -> str:
        return "zset" if self.score else "set"

    @property
    def columns(self) -> frozenset[str]:
        """The row's columns the entry reads."""
        names = set(placeholders(self.key)) | set(placeholders(self.member)) | ({self.score} if self.score else set())
        return frozenset(names - {"_id"})


def entries(lookups: tuple[Lookup, ...], row: Mapping[str, Any], doc_id: str) -> list[list[str]]:
    """[set key, member, score ("" for a set)] of each lookup the row is in. Raises LookupValueError
    when a score column holds something that is not a number, a date or a time."""
    out: list[list[str]] = []
    for lk in lookups:
        try:
            if any(row.get(c) is None for c in lk.columns):
                continue
            key = render_key(lk.key, row, doc_id)
            member = render_key(lk.member, row, doc_id)
        except (KeyError, ValueError, TypeError) as exc:
            raise LookupValueError(f"lookup {lk.key!r}: {exc}") from None
        score = ""
        if lk.score:
            value = score_of(row[lk.score], lk.score)
            if value is None:
                continue
            score = redis_double(value)
        out.append([key, member, score])
    return out


_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_INSTANT = re.compile(r"^([+-]?\d{4,})-(\d\d)-(\d\d)(?:[T ](\d\d):(\d\d):(\d\d)(\.\d+)?)?(Z|[+-]\d\d(?::?\d\d)?)?$")
_CLOCK = re.compile(r"^(\d\d):(\d\d):(\d\d)(\.\d+)?Z?$")
# Postgres's spellings, and Debezium's for numeric's infinities (PostgreSQL 14+).
_INFINITE = {"infinity": math.inf, "+infinity": math.inf, "-infinity": -math.inf, "inf": math.inf, "+inf": math.inf,
             "-inf": -math.inf, "positive_infinity": math.inf, "negative_infinity": -math.inf}


def score_of(value: Any, column: str = "") -> float | None:
    """A sorted set's score (a double, as Redis holds it): numbers (exact decimals round to the
    nearest double; beyond a double, +-inf), booleans 1/0, dates and timestamps as seconds since 1970
    UTC (a timestamp without zone read as UTC), times as seconds since midnight, infinities as such.
    None (no entry) for null and NaN."""
    if value is None:
        return None
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:   # beyond a double (a numeric rendered as a number)
            return math.inf if value > 0 else -math.inf
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, str):
        text = value.strip()
        low = text.lower()
        if low == "nan":
            return None
        if low in _INFINITE:
            return _INFINITE[low]
        if _NUMBER.match(text):
            return float(text)
        m = _INSTANT.match(text)
        if m:
            year, month, day, hh, mm, ss, frac, zone = m.groups()
            seconds = days_from_civil(int(year), int(month), int(day)) * 86_400
            seconds += int(hh or 0) * 3600 + int(mm or 0) * 60 + int(ss or 0) - _offset(zone)
            return float(f"{seconds}{frac or ''}")
        m = _CLOCK.match(text)
        if m:
            hh, mm, ss, frac = m.groups()
            return float(f"{int(hh) * 3600 + int(mm) * 60 + int(ss)}{frac or ''}")
    raise LookupValueError(f"score column {column or '?'}: {str(value)[:80]!r} is not a number, a date or a time")


def redis_double(score: float) -> str:
    """The score as ZADD reads it back to the same double."""
    if math.isinf(score):
        return "+inf" if score > 0 else "-inf"
    return repr(score)


def _offset(zone: str | None) -> int:
    if not zone or zone == "Z":
        return 0
    sign = -1 if zone[0] == "-" else 1
    digits = zone[1:].replace(":", "")
    return sign * (int(digits[:2]) * 3600 + int(digits[2:4] or 0) * 60)
