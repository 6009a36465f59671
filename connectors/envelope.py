"""Debezium JSON envelopes (with or without schemas) to `Change`s, one record (`decode`) or a batch
in offset order per partition (`decode_records`), each with the version that orders it among its
key's changes (`version_of`, at the end). Pure: no I/O, no Spark."""
from __future__ import annotations

import base64
import hashlib
import uuid
from operator import itemgetter
from typing import Any, Iterable
from urllib.parse import quote

import orjson

from derived.change import UNKNOWN, Change, DeadLetter, Position, Version

UNAVAILABLE = "__debezium_unavailable_value"
# Debezium renders its placeholder for an unchanged TOAST column in the column's own type: the text
# for text-like types (and one-element text[]), its bytes base64-encoded for bytea, the list of its
# byte values for numeric arrays, {placeholder: ...} for hstore, and a name-based UUID for uuid[].
_UNAVAILABLE_B64 = base64.b64encode(UNAVAILABLE.encode()).decode()
_UNAVAILABLE_INTS = list(UNAVAILABLE.encode())
_UNAVAILABLE_UUID = str(uuid.UUID(bytes=hashlib.md5(UNAVAILABLE.encode()).digest(), version=3))
# What the raw record holds when any column is the placeholder (a cheap test before decoding).
# (byte lists as compact JSON, as Kafka Connect's converter writes it, or with spaces.)
PLACEHOLDER_MARKERS = (UNAVAILABLE.encode(), _UNAVAILABLE_B64.rstrip("=").encode(), _UNAVAILABLE_UUID.encode(),
                       *(sep.join(map(str, _UNAVAILABLE_INTS[:12])).encode() for sep in (",", ", ")))


# Debezium's rendering of a multidimensional array (measured on 3.x, both the snapshot and the
# stream): each inner array reaches its element converter whole, which gives a null for most types
# and Java's Object.toString for text ("[Ljava.lang.String;@1b2c3d"). Such a column is read again
# from Postgres, where it is whole (pipelines/apply/toast_reread.py); a one-dimensional array of
# nulls only looks the same, and reading it again is as exact.
_GARBLED_MARKERS = (b"[null", b"[ null", b'"[L')


def garbled_arrays(raw: bytes, after: dict[str, Any], end: int | None = None) -> tuple[str, ...]:
    """The columns of `after` whose array value Debezium could not render (see above); `end`:
    where the record's rows end in `raw` (row_end)."""
    if not _holds_any(raw, _GARBLED_MARKERS, len(raw) if end is None else end):
        return ()
    return tuple(c for c, v in after.items() if type(v) is list and v and (
        all(x is None for x in v) or any(type(x) is str and x.startswith("[L") and ";@" in x for x in v)))


def may_hold_placeholder(raw: bytes, end: int | None = None) -> bool:
    return _holds_any(raw, PLACEHOLDER_MARKERS, len(raw) if end is None else end)


def row_end(raw: bytes) -> int:
    """Where the rows of a Debezium value end: its `source` block follows `before` and `after`
    and holds text a marker can match (a snapshot's `sequence` is "[null,..."), so the markers
    are looked for before it; the whole record when written in another order. The last
    `"source":` (a map column may hold that key; nothing after the block holds row values)."""
    source = raw.rfind(b'"source":')
    return source if 0 <= raw.find(b'"after":', 0, max(source, 0)) else len(raw)


def _holds_any(raw: bytes, markers: tuple[bytes, ...], end: int) -> bool:
    for marker in markers:   # a loop, not any(): this runs for every record
        if raw.find(marker, 0, end) >= 0:
            return True
    return False


def is_unavailable(value: Any) -> bool:
    """Whether a column value is Debezium's placeholder, in any type's rendering."""
    if isinstance(value, str):
        return value in (UNAVAILABLE, _UNAVAILABLE_B64) or (value.startswith('{"' + UNAVAILABLE) and
                                                            _json_dict_has_placeholder(value))
    if isinstance(value, list):
        return value == _UNAVAILABLE_INTS or UNAVAILABLE in value or _UNAVAILABLE_UUID in value
    if isinstance(value, dict):
        return UNAVAILABLE in value
    return False


def _json_dict_has_placeholder(text: str) -> bool:
    """hstore in `json` handling mode arrives as a JSON text."""
    try:
        return UNAVAILABLE in orjson.loads(text)
    except (orjson.JSONDecodeError, TypeError):
        return False
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
    if isinstance(data, dict) and len(data) == 2 and "payload" in data and "schema" in data:
        data = data["payload"]
    return data


def envelope_of(value: bytes) -> Any:
    """The value's envelope (a schema/payload wrapper taken off), for `decode(parsed=...)`."""
    return _json(value, "value")


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


def _truncate_marker(env: dict[str, Any], snapshot: bool, common: dict[str, Any]) -> Change | None:
    """A row of the truncate marker table, written by a statement-level TRUNCATE trigger inside the
    truncating transaction (connectors/postgres.py): the truncate of the table it names, at the
    row's own version. Everything written before the TRUNCATE, in earlier transactions or earlier in
    the same one, has a lower version; everything after it a higher one. Unlike Debezium's keyless
    truncate event it has a key (the table's name), so a compacted topic accepts it and keeps the
    latest one per table: what a rebuild needs. Snapshot reads and deletes of marker rows are no
    new truncate (a snapshot already reflects every earlier one)."""
    after = env.get("after")
    if snapshot or env.get("op") not in ("c", "u") or not isinstance(after, dict):
        return None
    target = after.get("table_name")
    if not isinstance(target, str) or "." not in target:
        raise RecordError("truncate marker without a schema.table in 'table_name'")
    return Change(target, "truncate", {}, "", None, **common)


def decode(key: bytes | None, value: bytes | None, position: Position, fence: int = 0,
           key_columns: list[str] | None = None, truncate_table: str | None = None,
           parsed: dict[str, Any] | None = None) -> Change | Tombstone | None:
    """The record as a `Change` (or a `Tombstone`); None for a truncate marker row that marks
    nothing new (see `_truncate_marker`). `parsed`: the value already parsed (`envelope_of`)."""
    key_data = None if key is None else _json(key, "key")
    if key_data is not None and not isinstance(key_data, dict):
        raise RecordError("key is not a JSON object")
    if value is None:
        return Tombstone(position, key_data)
    env = _json(value, "value") if parsed is None else parsed
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
                  snapshot=snapshot, snapshot_last=snapshot and is_final_snapshot_record(source))
    if table == truncate_table:
        return _truncate_marker(env, snapshot, common)
    if _OPS[op] == "truncate":  # Debezium's own keyless event (a compacted topic refuses it)
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
    end = row_end(value)
    garbled = garbled_arrays(value, after, end)
    if not garbled and not may_hold_placeholder(value, end):  # the common case: nothing to look for
        return Change(table, "upsert", key_data, doc_id, after, **common)
    unavailable = tuple(c for c, v in after.items() if c in garbled or is_unavailable(v))
    row = {c: v for c, v in after.items() if c not in unavailable}
    return Change(table, "upsert", key_data, doc_id, row, unavailable=unavailable,
                  created=op == "c" and not snapshot, reread=bool(garbled), **common)


# A batch of records.


def table_of_topic(topic: str) -> str:
    """`<prefix>.<schema>.<table>` -> schema.table (table names have no dots: see config)."""
    return ".".join(topic.rsplit(".", 2)[-2:])


def _tombstone_delete(t: Tombstone, table: str, key_columns: list[str] | None) -> Change | None:
    try:
        doc_id = document_id(t.key, key_columns)
    except RecordError:
        return None  # custom key columns the record key lacks: only the op=d record can tell
    return Change(table, "delete", t.key, doc_id, None, UNKNOWN, t.position, tombstone=True)


IN_OFFSET_ORDER = itemgetter("topic", "partition", "offset")   # a record dict's sort key


def decode_records(rows: Iterable[dict[str, Any]], fences: dict[str, int],
                   key_columns: dict[str, list[str] | None], known_tables: set[str],
                   tombstones_out: list[Change] | None = None, truncate_table: str | None = None
                   ) -> tuple[list[Change], list[DeadLetter], int, int]:
    """Decode in offset order per partition, advancing each partition's snapshot fence as it goes.
    Also returns the snapshot's final-record marker (its lsn), wherever it is: the final record is
    often one of a table this pipeline does not sync (heartbeat, signal). Tombstones of synced
    tables go to `tombstones_out` as deletes of their key (see derived/reduce.settle_tombstones)."""
    changes: list[Change] = []
    dead: list[DeadLetter] = []
    tombstones = 0
    snapshot_last_lsn = 0
    keyed_by: dict[str, list[str] | None] = {}   # topic -> its table's key columns
    for r in sorted(rows, key=IN_OFFSET_ORDER):
        pos = Position(r["topic"], r["partition"], r["offset"])
        fk = fence_key(pos.topic, pos.partition)
        if pos.topic not in keyed_by:
            keyed_by[pos.topic] = key_columns.get(table_of_topic(pos.topic))
        try:
            table_hint = None
            # With the key columns of the topic's table: decoded once, unless the record names another table.
            hint = keyed_by[pos.topic]
            try:
                out = decode(r["key"], r["value"], pos, fences.get(fk, 0), hint, truncate_table=truncate_table)
            except RecordError:
                if not hint:
                    raise
                # (the key columns' error, if it is one, is raised below once the table is known)
                hint = None
                out = decode(r["key"], r["value"], pos, fences.get(fk, 0), truncate_table=truncate_table)
            if out is None:
                continue  # a truncate marker row that marks nothing new
            if isinstance(out, Tombstone):
                tombstones += 1
                table = table_of_topic(pos.topic)
                if tombstones_out is not None and out.key and table in known_tables:
                    deleted = _tombstone_delete(out, table, key_columns.get(table))
                    if deleted is not None:
                        tombstones_out.append(deleted)
                continue
            table_hint = out.table
            if out.snapshot_last:
                snapshot_last_lsn = max(snapshot_last_lsn, out.version.lsn)
            if out.table not in known_tables:
                continue  # a captured table this config does not sync (e.g. the signal table)
            if key_columns.get(out.table) != hint and out.op != "truncate":
                out = decode(r["key"], r["value"], pos, fences.get(fk, 0), key_columns.get(out.table))
        except RecordError as exc:
            dead.append(DeadLetter(pos, r["key"], r["value"], "decode", str(exc),
                                   {"table": table_hint} if table_hint else {}))
            continue
        if out.snapshot:
            fences[fk] = max(fences.get(fk, 0), out.version.lsn)
        changes.append(out)
    return changes, dead, tombstones, snapshot_last_lsn


# The version: a per-key order from Debezium's `source` block (see `version_of`).


def fence_key(topic: str, partition: int) -> str:
    """How a partition's snapshot fence is named (`version_of`'s `fence`; kept per batch by
    pipelines/state/fences.py): "topic:partition"."""
    return f"{topic}:{partition}"


SNAPSHOT_MARKERS = {"true", "first", "last", "first_in_data_collection", "last_in_data_collection",
                    "incremental"}


class VersionError(ValueError):
    pass


def is_snapshot(source: dict[str, Any]) -> bool:
    return str(source.get("snapshot", "false")).lower() in SNAPSHOT_MARKERS


def is_final_snapshot_record(source: dict[str, Any]) -> bool:
    """Debezium's marker on the initial snapshot's last record (the streaming query and the
    bootstrap's bulk each take it as the snapshot's end)."""
    return source.get("snapshot") == "last"


_SEQUENCES: dict[str, tuple[int | None, int | None]] = {}   # a snapshot's reads all carry one


def _sequence(source: dict[str, Any]) -> tuple[int | None, int | None]:
    seq = source.get("sequence")
    if seq is None:
        return None, None
    known = _SEQUENCES.get(seq) if isinstance(seq, str) else None
    if known is not None:
        return known
    try:
        parts = orjson.loads(seq) if isinstance(seq, str) else seq
        a, b = parts[0], parts[1]
        out = (None if a is None else int(a)), (None if b is None else int(b))
    except (orjson.JSONDecodeError, ValueError, TypeError, IndexError):
        raise VersionError(f"source.sequence is not [commit, lsn]: {seq!r}") from None
    if isinstance(seq, str):
        if len(_SEQUENCES) >= 256:
            _SEQUENCES.clear()
        _SEQUENCES[seq] = out
    return out


def version_of(source: dict[str, Any], fence: int = 0, snapshot: bool | None = None) -> Version:
    """A per-key version from Debezium's `source` block that follows Postgres' commit order.

    Why not the Kafka offset: offsets restart on a recreated topic and repeat after a Connect crash.
    Why not the change's own `lsn`: a transaction that began before the slot's consistent point and
    committed after it is streamed (the snapshot did not see it), yet its changes can sit at WAL
    positions below the snapshot's `lsn`; ordering by `lsn` would let the older snapshot read win.

    What the fields give (Postgres, pgoutput):
    - snapshot reads carry `lsn` = L0, the slot's consistent point; `sequence` = [P, L0] where P is the
      last commit Debezium had processed (null for the initial snapshot).
    - a streamed change carries `sequence` = [P, lsn], P = end of the commit of the transaction
      streamed before it; null only for the first transaction after a snapshot without prior offsets.

    The version is (epoch, kind, lsn):
    - streamed with P: epoch = P. Two transactions touching the same row are serialised by its row
      lock, so the later one commits after the earlier one's commit: P(later) >= commit(earlier) >
      P(earlier). Every transaction streamed after a snapshot at L0 commits after L0, so P >= L0.
    - snapshot read: epoch = P if present (a blocking/incremental snapshot taken mid-stream) else L0,
      kind 0, so any change streamed after it at the same epoch (kind 1) wins. Incremental-snapshot
      reads have no `lsn` (`sequence` = [P, P]): they are emitted when a chunk's window closes, P being
      the last commit processed then; Debezium drops a read whose key changed inside the window, so
      every change committed before P is older than the read and every change streamed after it
      carries a P' >= P with kind 1.
    - streamed without P (the first transaction after a snapshot): it commits after L0, so
      epoch = max(lsn, fence), where `fence` is the highest snapshot `lsn` seen earlier in the same
      topic partition. Its key's snapshot read, if any, is in the same partition at a lower offset,
      so the fence covers exactly the case above; the next transaction's P exceeds this commit, so
      it still sorts below everything streamed after it.
    """
    prev, seq_lsn = _sequence(source)
    try:
        # Incremental-snapshot reads carry no lsn of their own: `sequence` holds the stream position
        # at which the chunk was emitted (P = the last commit processed).
        lsn = int(source["lsn"]) if source.get("lsn") is not None else int(seq_lsn)
    except (TypeError, ValueError):
        raise VersionError("source.lsn is missing or not a number") from None
    if is_snapshot(source) if snapshot is None else snapshot:
        return Version(prev if prev is not None else lsn, 0, lsn)
    if prev is not None:
        return Version(prev, 1, lsn)
    return Version(max(lsn, fence), 1, lsn)
