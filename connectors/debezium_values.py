"""Postgres values as Debezium's JSON converter renders them with cdckit's connector settings
(decimal.handling.mode=string, time.precision.mode=adaptive, interval.handling.mode=string), so
`verify` can compare database rows with what the stores hold: it types this rendering as the
pipeline types the records (connectors/typed_values.py).

Values psycopg cannot hold (dates and timestamps that are infinite, before year 1 or after 9999, a
time of 24:00:00) or holds otherwise than Debezium sends them (json as Postgres wrote it, money with
its currency sign, bit strings, inet and ranges as objects) are read as Postgres's text and parsed
here (`read_text`, used by pipelines/ops/verify_values.py's loaders). What Debezium sends for the
special ones was measured through Debezium 3.7's own classes and Kafka's JsonConverter (see
connectors/typed_values.py for the infinities): NaN and infinite floats as the strings "NaN",
"Infinity", "-Infinity"; bit(n > 1) and bit varying as the little-endian bytes of the bit string,
base64; bit(1) and bit varying(1) as booleans; money as the plain decimal without sign or grouping;
geometric types as structs with a WKB (`geometry`)."""
from __future__ import annotations

import base64
import datetime as dt
import json
import math
import re
import struct
import uuid
from decimal import Decimal
from fractions import Fraction
from typing import Any, NamedTuple

from connectors.typed_values import (DATE_INFINITY, DATE_MINUS_INFINITY, TIMESTAMP_MS_INFINITY,
                                     TIMESTAMP_MS_MINUS_INFINITY, TIMESTAMP_US_INFINITY, TIMESTAMP_US_MINUS_INFINITY,
                                     element_type, milliseconds)
from derived.calendar import days_from_civil

_EPOCH = dt.date(1970, 1, 1)


class Infinite(NamedTuple):
    """A date's or timestamp's 'infinity' (positive) or '-infinity'."""

    positive: bool


class Micros(int):
    """Microseconds read from Postgres's text: since 1970 (timestamp, in UTC for timestamptz) or
    since midnight (time); rendered in Debezium's unit for the column's precision."""


class ZonedText(str):
    """A timestamptz as Debezium's ZonedTimestamp text (ISO-8601 in UTC, 'Z')."""


class JsonText(str):
    """A json or jsonb value as Postgres wrote it: what Debezium sends."""


class BitText(str):
    """A bit string as Postgres writes it ('0101')."""


class Unreadable(str):
    """A value verify could not read: equal to nothing, shown with the reason."""

    def __eq__(self, other: object) -> bool:
        return False

    def __ne__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


_GEOMETRIC = {"point", "line", "lseg", "box", "path", "polygon", "circle"}


def _micros(t: dt.time) -> int:
    return ((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond


def render(value: Any, pg_type: str) -> Any:
    """`pg_type` is the type name (format_type), e.g. 'numeric(12,2)', 'timestamp with time zone', 'integer[]'."""
    if value is None:
        return None
    if isinstance(value, Unreadable):
        return value
    if isinstance(value, JsonText):
        return str(value)
    if pg_type in ("json", "jsonb") or (pg_type == "hstore" and isinstance(value, dict)):
        return json.dumps(value, separators=(",", ":"))  # a JSON array is no Postgres array; hstore.handling.mode=json
    if isinstance(value, Infinite):
        return _infinity(value.positive, element_type(pg_type))
    if isinstance(value, Micros):
        return int(value) // 1000 if _millis(pg_type) else int(value)
    if isinstance(value, ZonedText):
        return str(value)
    if isinstance(value, BitText):
        return _bits(value, element_type(pg_type))
    if isinstance(value, float) and not math.isfinite(value):
        return _float_json(value)
    if isinstance(value, str) and _base(element_type(pg_type)) in _GEOMETRIC:
        return geometric(_base(element_type(pg_type)), value)
    if isinstance(value, list):
        element = pg_type[:-2] if pg_type.endswith("[]") else pg_type
        return [render(v, element) for v in value]
    if isinstance(value, bool):
        return value
    if isinstance(value, Decimal):
        if not value.is_finite():  # Debezium's SpecialValueDecimal names (measured: a numeric NaN is "NAN")
            return "NAN" if value.is_nan() else "POSITIVE_INFINITY" if value > 0 else "NEGATIVE_INFINITY"
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


def _base(pg_type: str) -> str:
    return re.sub(r"\(.*\)", "", pg_type).strip()


def _infinity(positive: bool, element: str) -> Any:
    if element == "date":
        return DATE_INFINITY if positive else DATE_MINUS_INFINITY
    if "with time zone" in element or element == "timestamptz":
        return "infinity" if positive else "-infinity"      # ZonedTimestamp: the strings
    if _millis(element):
        return TIMESTAMP_MS_INFINITY if positive else TIMESTAMP_MS_MINUS_INFINITY
    return TIMESTAMP_US_INFINITY if positive else TIMESTAMP_US_MINUS_INFINITY


def _float_json(value: float) -> Any:
    """Kafka's JsonConverter (Jackson) writes non-finite doubles and floats as strings."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def _bits(text: str, element: str) -> Any:
    """bit(1) and bit varying(1): a boolean; otherwise the bit string's value as little-endian bytes,
    as few as hold its highest set bit (Debezium's Bits: '101' -> 0x05 -> 'BQ==', zeros -> '')."""
    mods = re.findall(r"\((\d+)\)", element)
    if mods == ["1"] or (_base(element) == "bit" and not mods):
        return int(text or "0", 2) != 0
    n = int(text, 2) if text else 0
    return base64.b64encode(n.to_bytes((n.bit_length() + 7) // 8, "little")).decode()


# --- reading Postgres's text ---------------------------------------------------------------------

_DATE_TEXT = re.compile(r"^(\d+)-(\d\d)-(\d\d)( BC)?$")
_TIMESTAMP_TEXT = re.compile(r"^(\d+)-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(\.\d+)?"
                             r"(?:([+-])(\d\d)(?::?(\d\d))?(?::?(\d\d))?)?( BC)?$")
_TIME_TEXT = re.compile(r"^(\d\d):(\d\d):(\d\d)(\.\d+)?$")


def date_days(text: str) -> int | Infinite:
    """Postgres's date text (DateStyle ISO): '2024-01-01', '0044-03-15 BC', '10000-01-01', 'infinity'."""
    if text in ("infinity", "-infinity"):
        return Infinite(text == "infinity")
    m = _DATE_TEXT.match(text)
    if m is None:
        raise ValueError(f"not a date: {text!r}")
    year = int(m.group(1))
    return days_from_civil(1 - year if m.group(4) else year, int(m.group(2)), int(m.group(3)))


def timestamp_micros(text: str) -> Micros | Infinite:
    """Postgres's timestamp or timestamptz text (DateStyle ISO), as µs since 1970 (in UTC when it
    has an offset): '2024-01-01 10:00:00.5', '0044-03-15 10:00:00+00:53:28 BC', 'infinity'."""
    if text in ("infinity", "-infinity"):
        return Infinite(text == "infinity")
    m = _TIMESTAMP_TEXT.match(text)
    if m is None:
        raise ValueError(f"not a timestamp: {text!r}")
    year = int(m.group(1))
    days = days_from_civil(1 - year if m.group(12) else year, int(m.group(2)), int(m.group(3)))
    seconds = days * 86_400 + int(m.group(4)) * 3600 + int(m.group(5)) * 60 + int(m.group(6))
    if m.group(8):
        offset = int(m.group(9)) * 3600 + int(m.group(10) or 0) * 60 + int(m.group(11) or 0)
        seconds -= offset if m.group(8) == "+" else -offset
    fraction = (m.group(7) or ".")[1:]
    return Micros(seconds * 1_000_000 + int((fraction + "000000")[:6]))


def zoned_text(text: str) -> ZonedText | Infinite:
    """A timestamptz's text as the instant Debezium's ZonedTimestamp names, ISO-8601 in UTC."""
    micros = timestamp_micros(text)
    if isinstance(micros, Infinite):
        return micros
    from connectors.typed_values import _civil, _clock

    days, rest = divmod(int(micros), 86_400_000_000)
    return ZonedText(f"{_civil(days)}T{_clock(rest, 1_000_000, 6)}Z")


_TIMETZ_TEXT = re.compile(r"^(\d\d):(\d\d):(\d\d)(\.\d+)?([+-])(\d\d)(?::(\d\d))?(?::(\d\d))?$")


def zoned_time(text: str) -> ZonedText:
    """A timetz's text as Debezium's ZonedTime: the time in UTC, 'Z' (24:00:00 at UTC stays 24:00:00)."""
    m = _TIMETZ_TEXT.match(text)
    if m is None:
        raise ValueError(f"not a timetz: {text!r}")
    offset = int(m.group(6)) * 3600 + int(m.group(7) or 0) * 60 + int(m.group(8) or 0)
    seconds = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3))
    seconds -= offset if m.group(5) == "+" else -offset
    if seconds != 86_400:
        seconds %= 86_400
    fraction = (m.group(4) or "").rstrip("0").rstrip(".")
    return ZonedText(f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}{fraction}Z")


def time_micros(text: str) -> Micros:
    """Postgres's time text, '24:00:00' included, as µs since midnight."""
    m = _TIME_TEXT.match(text)
    if m is None:
        raise ValueError(f"not a time: {text!r}")
    fraction = (m.group(4) or ".")[1:]
    seconds = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3))
    return Micros(seconds * 1_000_000 + int((fraction + "000000")[:6]))


def money_decimal(text: str) -> Decimal:
    """Postgres's money text ('-$1,234.56', '($1,234.56)') as Debezium reads it: sign, digits and
    the point kept, currency signs and grouping dropped (so a locale writing '1.234,56' reads
    as 1.23456 there too)."""
    negative = text.strip().startswith(("-", "("))
    digits = re.sub(r"[^0-9.]", "", text)
    return -Decimal(digits) if negative else Decimal(digits)


_PAIR = re.compile(r"\(\s*([^,()]+?)\s*,\s*([^,()]+?)\s*\)")


def geometric(kind: str, text: str) -> dict[str, Any]:
    """Postgres's text of a geometric value as Debezium's struct (io.debezium.data.geometry):
    point {x, y, wkb, srid}, circle {center, radius}, line {a, b, c}, box / lseg / path / polygon
    {wkb, srid, extensions} (a box as its closed 5-point ring; a polygon's ring closed; a path's
    open or closed flag in the extensions). Coordinates that are not finite as Jackson writes them."""
    numbers = [float(n) for n in re.findall(r"[-+]?(?:[0-9.]+(?:[eE][-+]?\d+)?|NaN|Infinity)", text)]
    points = [(float(x), float(y)) for x, y in _PAIR.findall(text)]
    if kind == "point":
        return _point(*numbers[:2])
    if kind == "circle":
        return {"center": _point(numbers[0], numbers[1]), "radius": _float_json(numbers[2])}
    if kind == "line":
        return dict(zip("abc", map(_float_json, numbers[:3])))
    if kind == "box":
        (x1, y1), (x2, y2) = points[:2]
        return _shape(_polygon([(x1, y1), (x1, y2), (x2, y2), (x2, y1), (x1, y1)]), {"type": "box"})
    if kind == "lseg":
        return _shape(_linestring(points), {"type": "lseg"})
    if kind == "path":
        closed = text.lstrip().startswith("(")
        return _shape(_linestring(points), {"type": "path", "closed": "true" if closed else "false"})
    ring = list(points) if points and points[0] == points[-1] else [*points, points[0]] if points else []
    return _shape(_polygon(ring), {"type": "polygon"})


def _point(x: float, y: float) -> dict[str, Any]:
    wkb = struct.pack("<BIdd", 1, 1, x, y)
    return {"x": _float_json(x), "y": _float_json(y), "wkb": base64.b64encode(wkb).decode(), "srid": None}


def _linestring(points: list[tuple[float, float]]) -> bytes:
    return struct.pack("<BII", 1, 2, len(points)) + b"".join(struct.pack("<dd", x, y) for x, y in points)


def _polygon(ring: list[tuple[float, float]]) -> bytes:
    return struct.pack("<BIII", 1, 3, 1, len(ring)) + b"".join(struct.pack("<dd", x, y) for x, y in ring)


def _shape(wkb: bytes, extensions: dict[str, str]) -> dict[str, Any]:
    return {"wkb": base64.b64encode(wkb).decode(), "srid": None, "extensions": extensions}


# The types Debezium 3.7 sends (PostgresValueConverter.schemaBuilder gives them a schema; with
# include.unknown.datatypes off, a column of any other type is left out of its records): by name,
# enums (typtype 'e') and arrays of these elements. Read from its source, not measured.
SENT_TYPES = {"bool", "int2", "int4", "int8", "oid", "float4", "float8", "numeric", "money", "char", "bpchar",
              "varchar", "text", "name", "bytea", "date", "time", "timetz", "timestamp", "timestamptz", "interval",
              "uuid", "json", "jsonb", "xml", "bit", "varbit", "inet", "cidr", "macaddr", "macaddr8", "int4range",
              "int8range", "numrange", "tsrange", "tstzrange", "daterange", "point", "box", "lseg", "path",
              "polygon", "circle", "line", "tsvector", "citext", "hstore", "ltree", "geometry", "geography",
              "vector", "halfvec", "sparsevec", "isbn"}
SENT_ARRAY_ELEMENTS = {"int2", "int4", "int8", "oid", "char", "varchar", "text", "bpchar", "numeric", "float4",
                       "float8", "bool", "date", "inet", "cidr", "macaddr", "macaddr8", "tsrange", "tstzrange",
                       "daterange", "int4range", "numrange", "int8range", "uuid", "jsonb", "json", "time", "timetz",
                       "timestamp", "timestamptz", "bytea", "citext", "hstore", "geometry", "geography", "ltree"}


def debezium_sends(type_name: str, type_type: str, element_name: str | None = None,
                   element_type_type: str | None = None) -> bool:
    """Whether Debezium sends a column of this type (pg_type's typname and typtype, a domain taken
    as its base type; for an array, its element's): a composite, an array of money, interval, xml,
    bit varying, point or of a domain, and types it does not know (pg_lsn, tsquery, ...) it leaves
    out."""
    if element_name is not None:
        return element_type_type == "e" or (element_type_type != "d" and element_name in SENT_ARRAY_ELEMENTS)
    return type_type == "e" or (type_type in ("b", "r") and type_name in SENT_TYPES)


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
        if element_type(pg_type) in ("real", "float4"):  # Debezium's float32 as its shortest decimal
            a, b = _float32(stored), _float32(expected)
            return a == b or (a != a and b != b)
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
        # timestamps: compare instants, not spellings (years beyond 1..9999 too: '-0043-...', '+10000-...')
        a, b = _instant(stored), _instant(expected)
        return a is not None and a == b
    return False


_ISO = re.compile(r"^([+-]?\d{4,})-(\d\d)-(\d\d)T(\d\d):(\d\d)(?::(\d\d)(\.\d+)?)?(Z|[+-]\d\d(?::?\d\d)?)$")


def _instant(text: str) -> tuple[int, int] | None:
    """(days since 1970, µs of the day) of an ISO-8601 timestamp with a zone, any year."""
    m = _ISO.match(text)
    if m is None:
        return None
    micros = (int(m.group(4)) * 3600 + int(m.group(5)) * 60 + int(m.group(6) or 0)) * 1_000_000
    micros += int(((m.group(7) or ".")[1:] + "000000")[:6])
    zone = m.group(8)
    if zone != "Z":
        hours, minutes = int(zone[1:3]), int(zone[-2:]) if len(zone) > 3 else 0
        micros -= (1 if zone[0] == "+" else -1) * (hours * 60 + minutes) * 60_000_000
    days = days_from_civil(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    extra, micros = divmod(micros, 86_400_000_000)
    return days + extra, micros


def _float32(value: Any) -> Any:
    try:
        return struct.unpack("<f", struct.pack("<f", float(value)))[0]
    except OverflowError:
        return float(value)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)


_element = element_type
