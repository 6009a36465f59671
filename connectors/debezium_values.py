"""Postgres values as Debezium's JSON converter renders them with cdckit's connector settings
(decimal.handling.mode=string, time.precision.mode=adaptive, interval.handling.mode=string),
so `verify` can compare database rows with what the stores hold."""
from __future__ import annotations

import base64
import datetime as dt
import json
import uuid
from decimal import Decimal
from typing import Any

_EPOCH = dt.date(1970, 1, 1)


def _micros(t: dt.time) -> int:
    return ((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond


def render(value: Any, pg_type: str) -> Any:
    """`pg_type` is the type name (format_type), e.g. 'numeric(12,2)', 'timestamp with time zone', 'integer[]'."""
    if value is None:
        return None
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
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds  # MicroTimestamp
    if isinstance(value, dt.date):
        return (value - _EPOCH).days
    if isinstance(value, dt.time):
        if value.tzinfo is not None:
            return value.strftime("%H:%M:%S.%f").rstrip("0").rstrip(".") + "Z"
        return _micros(value)
    if isinstance(value, dt.timedelta):
        return _iso_interval(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, uuid.UUID):
        return str(value)
    if pg_type in ("json", "jsonb"):
        return json.dumps(value, separators=(",", ":"))
    return value


def _iso_interval(td: dt.timedelta) -> str:
    seconds = td.days * 86_400 + td.seconds
    return f"P0Y0M{seconds // 86_400}DT{(seconds % 86_400) // 3600}H{(seconds % 3600) // 60}M{seconds % 60}S"


def same(stored: Any, expected: Any, pg_type: str) -> bool:
    """Equality with the few representation freedoms a store legitimately takes."""
    if stored == expected:
        return True
    if pg_type in ("json", "jsonb") and isinstance(stored, str) and isinstance(expected, str):
        try:
            return json.loads(stored) == json.loads(expected)
        except ValueError:
            return False
    if isinstance(expected, str) and expected.endswith("Z") and isinstance(stored, str):
        try:  # timestamps: compare instants, not spellings
            parse = lambda s: dt.datetime.fromisoformat(s.replace("Z", "+00:00"))  # noqa: E731
            return parse(stored) == parse(expected)
        except ValueError:
            return False
    if isinstance(expected, float) or isinstance(stored, float):
        try:
            return abs(float(stored) - float(expected)) <= 1e-9 * max(1.0, abs(float(expected)))
        except (TypeError, ValueError):
            return False
    return False
