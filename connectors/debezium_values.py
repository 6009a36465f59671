"""Postgres values as Debezium's JSON converter renders them with cdckit's connector settings
(decimal.handling.mode=string, time.precision.mode=adaptive, interval.handling.mode=string), so
`verify` can compare database rows with what the stores hold: it types this rendering as the
pipeline types the records (connectors/typed_values.py)."""
from __future__ import annotations

import base64
import datetime as dt
import json
import re
import uuid
from decimal import Decimal
from fractions import Fraction
from typing import Any, NamedTuple

from connectors.typed_values import element_type, milliseconds

_EPOCH = dt.date(1970, 1, 1)


def _micros(t: dt.time) -> int:
    return ((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond


def render(value: Any, pg_type: str) -> Any:
    """`pg_type` is the type name (format_type), e.g. 'numeric(12,2)', 'timestamp with time zone', 'integer[]'."""
    if value is None:
        return None
    if pg_type in ("json", "jsonb") or (pg_type == "hstore" and isinstance(value, dict)):
        return json.dumps(value, separators=(",", ":"))  # a JSON array is no Postgres array; hstore.handling.mode=json
    if isinstance(value, list):
        element = pg_type[:-2] if pg_type.endswith("[]") else pg_type
        return [render(v, element) for v in value]
    if isinstance(value, bool):
        return value
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:  # ZonedTimestamp: ISO-8601 in UTC with Z
            text = value.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f").rstrip("0").rstrip(".")
            return text + "Z"
        epoch = dt.datetime(1970, 1, 1)
        delta = value - epoch
        micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        return micros // 1000 if _millis(pg_type) else micros  # Timestamp (p <= 3) / MicroTimestamp
    if isinstance(value, dt.date):
        return (value - _EPOCH).days
    if isinstance(value, dt.time):
        if value.tzinfo is not None:  # ZonedTime: the time in UTC
            utc = (dt.datetime.combine(_EPOCH, value.replace(tzinfo=None)) - value.utcoffset()).time()
            return utc.strftime("%H:%M:%S.%f").rstrip("0").rstrip(".") + "Z"
        return _micros(value) // 1000 if _millis(pg_type) else _micros(value)  # Time (p <= 3) / MicroTime
    if isinstance(value, IntervalFields):
        return value.iso()
    if isinstance(value, dt.timedelta):
        return _iso_interval(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


_millis = milliseconds


class IntervalFields(NamedTuple):
    """An interval as Postgres keeps it: months, days and time apart ('12 days 24:00:00' is not
    '13 days'; a timedelta folds them). Debezium's string mode sends these fields as they are."""

    years: int
    months: int
    days: int
    hours: int
    minutes: int
    seconds: Decimal

    def iso(self) -> str:
        seconds = format(self.seconds.normalize(), "f") if self.seconds % 1 else str(int(self.seconds))
        return f"P{self.years}Y{self.months}M{self.days}DT{self.hours}H{self.minutes}M{seconds}S"


_INTERVAL_PART = re.compile(r"([+-]?\d+) (year|mon|day)s?")
_INTERVAL_TIME = re.compile(r"([+-])?(\d+):(\d+):(\d+(?:\.\d+)?)")


def parse_interval(text: str) -> IntervalFields:
    """Postgres's interval output in its default IntervalStyle 'postgres',
    e.g. '1 year 2 mons -3 days +04:05:06.5'."""
    parts = {unit: int(n) for n, unit in _INTERVAL_PART.findall(text)}
    hours = minutes = 0
    seconds = Decimal(0)
    m = _INTERVAL_TIME.search(text)
    if m:
        sign = -1 if m.group(1) == "-" else 1
        hours, minutes, seconds = sign * int(m.group(2)), sign * int(m.group(3)), sign * Decimal(m.group(4))
    return IntervalFields(parts.get("year", 0), parts.get("mon", 0), parts.get("day", 0), hours, minutes, seconds)


def _iso_interval(td: dt.timedelta) -> str:
    seconds = td.days * 86_400 + td.seconds
    return f"P0Y0M{seconds // 86_400}DT{(seconds % 86_400) // 3600}H{(seconds % 3600) // 60}M{seconds % 60}S"


def same(stored: Any, expected: Any, pg_type: str) -> bool:
    """Exact equality, with only the representation freedoms a store legitimately takes: numbers by
    value (an integer and a double are equal only if the double is exactly that integer; a double
    by its exact binary value, i.e. its shortest round-trip text), numerics by decimal value, JSON by
    the values it holds, timestamps as instants. No tolerance."""
    if _number(stored) and _number(expected):
        try:
            return Fraction(stored) == Fraction(expected)
        except (ValueError, OverflowError):  # NaN and infinities
            return repr(float(stored)) == repr(float(expected))
    if type(stored) is not type(expected) and not (isinstance(stored, str) and isinstance(expected, str)):
        return False
    if stored == expected and not isinstance(stored, (list, dict)):
        return True
    if isinstance(stored, list) and isinstance(expected, list):
        return len(stored) == len(expected) and all(same(s, e, _element(pg_type)) for s, e in zip(stored, expected))
    if isinstance(stored, dict) and isinstance(expected, dict):
        return stored.keys() == expected.keys() and all(same(stored[k], expected[k], "") for k in stored)
    if pg_type in ("json", "jsonb", "hstore") and isinstance(stored, str) and isinstance(expected, str):
        try:
            return same(json.loads(stored, parse_float=Decimal), json.loads(expected, parse_float=Decimal), "")
        except ValueError:
            return False
    if pg_type.startswith("numeric") and isinstance(stored, str) and isinstance(expected, str):
        try:
            return Decimal(stored) == Decimal(expected)
        except ArithmeticError:
            return False
    if isinstance(expected, str) and expected.endswith("Z") and isinstance(stored, str):
        try:  # timestamps: compare instants, not spellings
            parse = lambda s: dt.datetime.fromisoformat(s.replace("Z", "+00:00"))  # noqa: E731
            return parse(stored) == parse(expected)
        except ValueError:
            return False
    return False


def _number(value: Any) -> bool:
    return isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)


_element = element_type
