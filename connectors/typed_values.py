"""Debezium's wire values to the values documents hold, by the column's Postgres type.

Debezium's JSON converter (connectors/debezium_config.py) sends a `date` as days since 1970, a
`timestamp` as micro- or milliseconds since 1970 (time.precision.mode=adaptive: `timestamp(0..3)`
in ms), a `time` as micro- or milliseconds since midnight, json/jsonb/hstore as JSON text and
numeric as a decimal string. A search engine maps those as long and text: a range query on a date
or a filter on a jsonb field does not work. Documents get instead:

  date -> 'YYYY-MM-DD'          timestamp -> 'YYYY-MM-DDTHH:MM:SS[.fff|.ffffff]' (no zone)
  (years beyond 1..9999 as '+10000-01-01' / '-0043-03-15', astronomical; 'infinity' / '-infinity')
  time -> 'HH:MM:SS[.fff|.ffffff]'      json, jsonb, hstore -> the JSON value (object, array, ...),
  or its JSON text when no index could take it (see `_json`)
  numeric, money -> the exact decimal string; a JSON number for the columns the config names
  everything else as Debezium sends it: timestamptz/timetz ISO-8601 UTC, interval ISO-8601,
  uuid text, bytea base64, booleans, integers, floats, text; arrays element by element.

Types come from the catalog, not from schemas in every record (see docs/documents.md "Typed documents" for the
measurement). Around an ALTER COLUMN TYPE a record may still carry the old type's value: a value
whose JSON type is not what the column's type sends is left as it came (each record keeps its own
shape) and the schema watch's re-read rewrites every row in the new type. Pure: no I/O.
"""
from __future__ import annotations

import datetime as dt
import math
import re
from typing import Any, Callable, Mapping

import orjson

Convert = Callable[[Any], Any]
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_PRECISION = re.compile(r"^(?:timestamp|time)\((\d)\)")
# format_type spellings, matched whole (a domain or enum may be called timestamp_ms or numeric_id).
_TIMESTAMP = re.compile(r"^timestamp(\(\d\))?( without time zone)?$")
_TIME = re.compile(r"^time(\(\d\))?( without time zone)?$")
_NUMERIC = re.compile(r"^(numeric(\(\d+(,\s*-?\d+)?\))?|money)$")

# What Debezium 3.7 sends for 'infinity' and '-infinity' (measured through its own classes, with
# Kafka's JsonConverter: see docs/documents.md "Index definitions"). A date while streaming: the day numbers of
# +5877611-06-21 and -5877611-06-22, beyond Postgres's last date; in the initial snapshot (read
# through JDBC) an int overflow: about -622,191,234 and -625,821,272 (a day either way with the JVM's
# time zone), before Postgres's first date. A timestamp(0..3), in ms: 9223372036825200000 and
# -9223372036832400000 (the latest real one is 9.2e15 ms); a timestamp in µs: the long's ends,
# 2^63 - 1 and -2^63 (timestamps after about 294247 AD, 30 years before Postgres's last one, reach
# them too: they read as infinity). timestamptz: the strings 'infinity' and '-infinity'.
DATE_MIN_DAYS, DATE_MAX_DAYS = -2_440_588, 2_145_042_905      # 4714-11-24 BC, 5874897-12-31
DATE_INFINITY, DATE_MINUS_INFINITY = 2_146_033_979, -2_147_472_691
DATE_INFINITY_SNAPSHOT = -622_191_234
TIMESTAMP_MS_INFINITY, TIMESTAMP_MS_MINUS_INFINITY = 9_223_372_036_825_200_000, -9_223_372_036_832_400_000
TIMESTAMP_US_INFINITY, TIMESTAMP_US_MINUS_INFINITY = (1 << 63) - 1, -(1 << 63)

# A JSON value is held as its JSON text (a string) instead of the value when no store or index
# could take the value: nested deeper than JSON_DEPTH (orjson writes documents at most 254 levels
# deep, a nested document's relations add levels), or with a leaf whose key path and value pass
# JSON_LEAF_BYTES in UTF-8 (a flattened field indexes "<field>.<path>=<value>" as one term, and a
# term beyond 32,766 bytes fails the whole document; the rest is left for the field's own name).
# Also a number beyond a double (1e400), which orjson does not read. Everything else is the value.
JSON_DEPTH = 100
JSON_LEAF_BYTES = 32_000


def element_type(pg_type: str) -> str:
    return pg_type[:-2] if pg_type.endswith("[]") else pg_type


def milliseconds(pg_type: str) -> bool:
    """time.precision.mode=adaptive: timestamp(0..3) and time(0..3) travel in milliseconds."""
    m = _PRECISION.match(element_type(pg_type))
    return m is not None and int(m.group(1)) <= 3 and "with time zone" not in pg_type


def converter(pg_type: str, as_number: bool = False) -> Convert | None:
    """The function turning this type's wire values into document values; None when they are
    the same (most types: the fast path does nothing for them)."""
    element = element_type(pg_type)
    one = _scalar_converter(element, as_number)
    if one is None:
        return None
    if element != pg_type:
        def each(v):   # a multidimensional array nests lists (read from Postgres: see envelope.garbled_arrays)
            return [each(x) for x in v] if isinstance(v, list) else one(v)
        return each
    return one


def _scalar_converter(element: str, as_number: bool) -> Convert | None:
    if element == "date":
        return _date
    if _TIMESTAMP.match(element):
        return _timestamp_ms if milliseconds(element) else _timestamp_us
    if _TIME.match(element):
        return _time_ms if milliseconds(element) else _time_us
    if element in ("json", "jsonb", "hstore"):
        return _json
    if as_number and is_numeric(element):
        return _number
    return None


def is_numeric(pg_type: str) -> bool:
    """numeric(p,s) or money, or an array of them: Debezium sends their values as decimal strings."""
    return _NUMERIC.match(element_type(pg_type)) is not None


def row_converter(types: Mapping[str, str], numbers: frozenset[str] | set[str] = frozenset()
                  ) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A row's wire values to document values (a new dict); columns whose values need nothing are
    copied as they are. `numbers`: numeric columns rendered as numbers."""
    plan = {c: f for c, t in types.items() if (f := converter(t, c in numbers)) is not None}
    if not plan:
        return dict

    def convert(row: dict[str, Any]) -> dict[str, Any]:
        out = dict(row)
        for column, f in plan.items():
            value = out.get(column)
            if value is not None:
                out[column] = f(value)
        return out

    return convert


def _date(v: Any) -> Any:
    if not isinstance(v, int) or isinstance(v, bool):
        return v
    if v > DATE_MAX_DAYS:
        return "infinity"
    if v < DATE_MIN_DAYS:
        return "infinity" if abs(v - DATE_INFINITY_SNAPSHOT) <= 2 else "-infinity"
    try:
        return dt.date.fromordinal(_EPOCH_ORDINAL + v).isoformat()
    except (ValueError, OverflowError):
        return _civil(v)


def _timestamp(v: Any, per_second: int, digits: int) -> Any:
    if not isinstance(v, int) or isinstance(v, bool):
        return v
    if (v >= TIMESTAMP_US_INFINITY or v <= TIMESTAMP_US_MINUS_INFINITY
            or (per_second == 1000 and abs(v) > 10 ** 18)):
        return "infinity" if v > 0 else "-infinity"
    days, rest = divmod(v, 86_400 * per_second)
    try:
        date = dt.date.fromordinal(_EPOCH_ORDINAL + days).isoformat()
    except (ValueError, OverflowError):
        date = _civil(days)
    return f"{date}T{_clock(rest, per_second, digits)}"


def _timestamp_us(v: Any) -> Any:
    return _timestamp(v, 1_000_000, 6)


def _timestamp_ms(v: Any) -> Any:
    return _timestamp(v, 1_000, 3)


def _time_us(v: Any) -> Any:
    return _clock(v, 1_000_000, 6) if isinstance(v, int) and not isinstance(v, bool) else v


def _time_ms(v: Any) -> Any:
    return _clock(v, 1_000, 3) if isinstance(v, int) and not isinstance(v, bool) else v


def _clock(units: int, per_second: int, digits: int) -> str:
    """HH:MM:SS, and the fraction when there is one (24:00:00 is a valid Postgres time)."""
    seconds, fraction = divmod(units, per_second)
    text = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    return f"{text}.{fraction:0{digits}d}" if fraction else text


def _civil(days: int) -> str:
    """Days since 1970 as an ISO-8601 date beyond Python's years 1..9999 (Postgres has 4713 BC to
    5874897 AD): proleptic Gregorian, astronomical year numbering, expanded year with a sign."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (month <= 2)
    sign = "-" if year < 0 else ("+" if year > 9999 else "")
    return f"{sign}{abs(year):04d}-{month:02d}-{day:02d}"


def _json(v: Any) -> Any:
    if not isinstance(v, str):
        return v
    try:
        value = orjson.loads(v)  # integers beyond 64 bits arrive as doubles, as in any JSON store
    except orjson.JSONDecodeError:  # a number beyond a double, deeper than 1,024 levels
        return v
    return value if indexable_json(value, v) else v


def indexable_json(value: Any, text: str | None = None) -> bool:
    """No nesting beyond JSON_DEPTH and no leaf whose dotted key path, '=' and value pass
    JSON_LEAF_BYTES (see above). `text`, the JSON the value was read from, settles the usual case
    at once: a short text can hold neither."""
    if not isinstance(value, (dict, list)):
        return True
    if text is not None and len(text) * 4 < JSON_LEAF_BYTES and text.count("{") + text.count("[") <= JSON_DEPTH:
        return True
    pending: list[tuple[Any, int, int]] = [(value, 0, 0)]   # (value, bytes of its path, its depth)
    while pending:
        node, path, depth = pending.pop()
        if isinstance(node, dict):
            if depth + 1 > JSON_DEPTH:
                return False
            for key, child in node.items():
                below = path + (1 if path else 0) + len(key.encode())
                if below + 1 > JSON_LEAF_BYTES:
                    return False
                pending.append((child, below, depth + 1))
        elif isinstance(node, list):
            if depth + 1 > JSON_DEPTH:
                return False
            pending.extend((child, path, depth + 1) for child in node)
        elif isinstance(node, str):
            if path + 1 + len(node.encode()) > JSON_LEAF_BYTES:
                return False
        elif path + 25 > JSON_LEAF_BYTES:  # a number's or a boolean's text
            return False
    return True


def _number(v: Any) -> Any:
    """A decimal string as a JSON number: an integer when it has no fraction (exact up to 64 bits),
    else a double. NaN and infinities stay strings (JSON has no such numbers)."""
    if not isinstance(v, str):
        return v
    try:
        if re.fullmatch(r"-?\d+", v):
            n = int(v)
            return n if -(1 << 63) <= n < (1 << 64) else float(n)
        f = float(v)
    except (ValueError, OverflowError):  # beyond a double (numeric holds 10^131072): the exact string
        return v
    return f if math.isfinite(f) else v
