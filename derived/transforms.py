"""Computed fields (issue #39.3): a document's fields made from its row, by a small set of
operations, on the values as documents hold them (connectors/typed_values.py) after the row's own
fields are projected and renamed; every path (the sinks, the rebuild, `verify`) shapes a row with
derived/shape.py, which calls `computed_fields`, so they agree by construction.

    concat:    [column | {text: "..."}, ...]   NULLs count as empty, as SQL's concat()
    lower / upper: column                    a string's case (other values as they are)
    map:       {column, values: {from: to}, default}   a value mapping (default: null)
    date_part: {column, part}                year, month, day, hour, minute, second, dow (0 Sunday),
                                             doy, quarter, epoch (seconds) of a date or timestamp
    constant:  any value

A field reads columns by their Postgres names, before renames. Pure: no I/O.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Mapping

from derived.calendar import days_from_civil

OPERATIONS = ("concat", "lower", "upper", "map", "date_part", "constant")
PARTS = ("year", "month", "day", "hour", "minute", "second", "dow", "doy", "quarter", "epoch")
_STAMP = re.compile(r"^([+-]?\d{4,})-(\d\d)-(\d\d)(?:[T ](\d\d):(\d\d):(\d\d)(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?$")


class TransformError(ValueError):
    pass


def columns_read(spec: Mapping[str, Any]) -> set[str]:
    """The columns one computed field reads."""
    op, arg = _only(spec)
    if op == "concat":
        return {a for a in arg if isinstance(a, str)}
    if op in ("lower", "upper"):
        return {arg}
    if op in ("map", "date_part"):
        return {arg["column"]}
    return set()


def _only(spec: Mapping[str, Any]) -> tuple[str, Any]:
    if not isinstance(spec, Mapping) or len(spec) != 1 or next(iter(spec)) not in OPERATIONS:
        raise TransformError(f"a computed field is one of {', '.join(OPERATIONS)}, e.g. {{lower: email}}; "
                             f"got {spec!r}")
    return next(iter(spec.items()))


def check(spec: Mapping[str, Any]) -> None:
    """TransformError when a computed field's spec is not well formed."""
    op, arg = _only(spec)
    if op == "concat":
        if not isinstance(arg, list) or not arg or not all(
                isinstance(a, str) or (isinstance(a, Mapping) and set(a) == {"text"}) for a in arg):
            raise TransformError("concat takes a list of column names and {text: ...} pieces")
    elif op in ("lower", "upper"):
        if not isinstance(arg, str):
            raise TransformError(f"{op} takes a column name")
    elif op == "map":
        if not isinstance(arg, Mapping) or not isinstance(arg.get("column"), str) or not isinstance(
                arg.get("values"), Mapping) or not set(arg) <= {"column", "values", "default"}:
            raise TransformError("map takes {column: ..., values: {from: to, ...}, default: ...}")
    elif op == "date_part":
        if not isinstance(arg, Mapping) or set(arg) != {"column", "part"} or arg["part"] not in PARTS:
            raise TransformError(f"date_part takes {{column: ..., part: one of {', '.join(PARTS)}}}")


def compile_field(spec: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], Any]:
    check(spec)
    op, arg = _only(spec)
    if op == "constant":
        return lambda row: arg
    if op == "concat":
        pieces = [(a, None) if isinstance(a, str) else (None, str(a["text"])) for a in arg]
        return lambda row: "".join(text if col is None else _text(row.get(col)) for col, text in pieces)
    if op in ("lower", "upper"):
        return lambda row: _case(row.get(arg), op)
    if op == "map":
        column, values, default = arg["column"], {str(k): v for k, v in arg["values"].items()}, arg.get("default")
        return lambda row: default if row.get(column) is None else values.get(_key(row.get(column)), default)
    column, part = arg["column"], arg["part"]
    return lambda row: date_part(row.get(column), part)


def _text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    return v if isinstance(v, str) else str(v)


def _key(v: Any) -> str:
    return "true" if v is True else "false" if v is False else str(v)


def _case(v: Any, op: str) -> Any:
    if not isinstance(v, str):
        return v
    return v.lower() if op == "lower" else v.upper()


def date_part(v: Any, part: str) -> int | float | None:
    """A part of a date or timestamp as documents hold it ('2024-03-15', '2024-03-15T10:00:00.5',
    '2024-03-15T10:00:00Z', astronomical years '-0043-03-15'); None for null, infinity or a value
    that is not one."""
    if not isinstance(v, str):
        return None
    m = _STAMP.match(v)
    if m is None:
        return None
    year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
    hour, minute, second = (int(m.group(i) or 0) for i in (4, 5, 6))
    fraction = float(m.group(7) or 0)
    if part == "year":
        return year
    if part == "month":
        return month
    if part == "day":
        return day
    if part == "hour":
        return hour
    if part == "minute":
        return minute
    if part == "second":
        return second + fraction if fraction else second
    if part == "quarter":
        return (month - 1) // 3 + 1
    days = days_from_civil(year, month, day)
    if part == "dow":
        return (days + 4) % 7   # 1970-01-01 was a Thursday
    if part == "doy":
        return days - days_from_civil(year, 1, 1) + 1
    offset = 0
    zone = m.group(8)
    if zone and zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        hh, mm = int(zone[1:3]), int(zone[-2:])
        offset = sign * (hh * 3600 + mm * 60)
    seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset
    return seconds + fraction if fraction else seconds


_compiled: dict[int, tuple[Any, dict[str, Callable]]] = {}   # id -> (the fields, held so the id stays theirs, ...)


def computed_fields(row: Mapping[str, Any], fields: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Each computed field's value for this row."""
    key = id(fields)
    cached = _compiled.get(key)
    if cached is None or cached[0] is not fields:
        if len(_compiled) > 256:   # configs parsed again and again (tests): keep the cache small
            _compiled.clear()
        cached = _compiled[key] = (fields, {name: compile_field(spec) for name, spec in fields.items()})
    return {name: f(row) for name, f in cached[1].items()}

