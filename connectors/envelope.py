"""Debezium JSON envelopes (with or without schemas) to `Change`s. Pure: no I/O, no Spark."""
from __future__ import annotations

from typing import Any
from urllib.parse import quote

import orjson

from connectors.version import VersionError, is_snapshot, version_of
from derived.change import Change, Position

UNAVAILABLE = "__debezium_unavailable_value"
_UNAVAILABLE_BYTES = UNAVAILABLE.encode()
_OPS = {"c": "upsert", "u": "upsert", "r": "upsert", "d": "delete", "t": "truncate"}


class RecordError(ValueError):
    """A record that cannot be decoded; the reason goes to the dead-letter topic."""


class Tombstone:
    """A null-value record after a delete: compaction's marker, nothing for the stores to do."""

    __slots__ = ("position", "key")

    def __init__(self, position: Position, key: dict[str, Any] | None):
        self.position, self.key = position, key


def _json(raw: bytes, what: str) -> Any:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise RecordError(f"{what} is not valid JSON: {exc}") from None
    # With schemas.enable=true the converter wraps everything as {"schema": ..., "payload": ...}.
    if isinstance(data, dict) and set(data) == {"schema", "payload"}:
        data = data["payload"]
    return data


def document_id(key: dict[str, Any], columns: list[str] | None = None) -> str:
    """Stable id: the value for one key column, escaped values joined by '|' for several."""
    names = columns or list(key)
    try:
        values = [key[c] for c in names]
    except KeyError as exc:
        raise RecordError(f"key column {exc.args[0]!r} is missing from the record key") from None
    if None in values:
        raise RecordError(f"key column is null: {dict(zip(names, values))}")
    if len(values) == 1:
        return str(values[0])
    return "|".join(quote(str(v), safe="") for v in values)


def decode(key: bytes | None, value: bytes | None, position: Position, fence: int = 0,
           key_columns: list[str] | None = None) -> Change | Tombstone:
    key_data = None if key is None else _json(key, "key")
    if key_data is not None and not isinstance(key_data, dict):
        raise RecordError("key is not a JSON object")
    if value is None:
        return Tombstone(position, key_data)
    env = _json(value, "value")
    if not isinstance(env, dict):
        raise RecordError("value is not a JSON object")
    op = env.get("op")
    if op not in _OPS:
        raise RecordError(f"unknown op {op!r}")
    source = env.get("source")
    if not isinstance(source, dict) or not source.get("table"):
        raise RecordError("source block with schema and table is missing")
    table = f"{source.get('schema', 'public')}.{source['table']}"
    snapshot = is_snapshot(source)
    try:
        version = version_of(source, fence, snapshot)
    except VersionError as exc:
        raise RecordError(str(exc)) from None
    common = dict(version=version, position=position, source_ts_ms=source.get("ts_ms"),
                  snapshot=snapshot, snapshot_last=snapshot and source.get("snapshot") == "last")
    if _OPS[op] == "truncate":
        return Change(table, "truncate", {}, "", None, **common)
    if key_data is None:
        raise RecordError(f"op {op!r} without a record key (table without primary key?)")
    if key_columns:
        row_for_key = env.get("after") or env.get("before") or {}
        key_data = {c: key_data.get(c, row_for_key.get(c)) for c in key_columns}
    doc_id = document_id(key_data, key_columns)
    if _OPS[op] == "delete":
        return Change(table, "delete", key_data, doc_id, None, **common)
    after = env.get("after")
    if not isinstance(after, dict):
        raise RecordError(f"op {op!r} without an 'after' row")
    if _UNAVAILABLE_BYTES not in value:  # the common case: no unchanged TOAST column to look for
        return Change(table, "upsert", key_data, doc_id, after, **common)
    unavailable = tuple(c for c, v in after.items() if v == UNAVAILABLE
                        or (isinstance(v, list) and UNAVAILABLE in v))
    row = {c: v for c, v in after.items() if c not in unavailable}
    return Change(table, "upsert", key_data, doc_id, row, unavailable=unavailable, **common)
