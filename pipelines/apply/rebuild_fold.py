"""Replaying one partition of a (possibly compacted) change topic into the last state of each key.

Plain Python: the rebuild's Spark job runs it once per Kafka partition (a key and its snapshot
fence live in one partition), and tests feed it the shapes a compacted log can take.

What survives is the newest upsert per key, by version. Three things take keys away:
- a delete (op=d), by version, like in the live pipeline;
- a tombstone: compaction may have removed the op=d record and left only the tombstone, so a
  tombstone removes its key's state from records at lower offsets (it is always produced right
  after the delete, so everything below it in the partition is older);
- a truncate: every key of the table whose version is below the truncate's. Its marker is in
  another topic's partition (connectors/envelope.py): the rebuild reads the cuts first and starts
  every partition's fold from them (`truncated`).

Speed: most records are superseded, so the common record is only parsed far enough for its
version and kept as raw bytes per raw key (`_Raw`); only survivors are decoded into `Change`s.
Anything unusual (TOAST placeholders, truncates, custom key columns, records that fail to decode)
takes the general path, and a key that has taken it stays there.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, NamedTuple

import orjson

from connectors.envelope import (RecordError, Tombstone, VersionError, decode, decode_records, document_id,
                                 envelope_of, fence_key, is_final_snapshot_record, is_snapshot, may_hold_placeholder,
                                 version_of)
from derived.change import Change, DeadLetter, Position, Version
from derived.reduce import fold_into

_FAST_OPS = {"c": False, "u": False, "r": False, "d": True}   # op -> is a delete


class _Raw(NamedTuple):
    version: Version
    offset: int
    value: bytes
    delete: bool
    topic: str
    partition: int


@dataclass
class PartitionFold:
    key_columns: dict[str, list[str] | None]      # every synced table -> its key columns (None: PK)
    topic_tables: dict[str, str]                  # topic -> schema.table
    fences: dict[str, int] = field(default_factory=dict)
    truncate_table: str | None = None              # marker rows there are truncates of other tables
    latest: dict[tuple[str, str], Change] = field(default_factory=dict)   # the general path's keys
    raw: dict[bytes, _Raw] = field(default_factory=dict)                  # the fast path's keys
    slow_keys: set[bytes] = field(default_factory=set)
    truncated: dict[str, Version] = field(default_factory=dict)
    dead: list[DeadLetter] = field(default_factory=list)
    records: int = 0
    tombstones: int = 0
    # The bootstrap's bulk (pipelines/bootstrap/bootstrap_bulk.py): only the partition's leading run of
    # snapshot reads is folded; the first other record (a change, a tombstone) stops the fold there
    # and the streaming query applies the rest, deletes included.
    reads_only: bool = False
    stopped_at: int | None = None
    snapshot_last: bool = False    # a reads_only fold met Debezium's final snapshot record (snapshot=last)

    def add(self, rows: list[dict[str, Any]]) -> None:
        """Fold the next records of the partition (in offset order, chunk after chunk)."""
        for r in sorted(rows, key=lambda r: r["offset"]):
            self._one(r["key"], r["value"], r["topic"], r["partition"], r["offset"])

    def add_messages(self, topic: str, partition: int, messages: list) -> bool:
        """The same from confluent-kafka messages of one partition, in offset order: no row dicts
        on the way (the rebuild's bulk reads hundreds of thousands per partition). False once a
        `reads_only` fold has stopped (`stopped_at`)."""
        for m in messages:
            if not self._one(m.key(), m.value(), topic, partition, m.offset()):
                return False
        return True

    def _one(self, key: bytes | None, value: bytes | None, topic: str, partition: int, offset: int) -> bool:
        if self.reads_only:
            try:
                env = _snapshot_read(value)
            except RecordError as exc:
                # Dead-lettered here, as the streaming query would: stopping would leave the rest of the
                # partition's snapshot to a stream that `bootstrap --once` never runs.
                self.records += 1
                table = self.topic_tables.get(topic)
                self.dead.append(DeadLetter(Position(topic, partition, offset), key, value, "decode", str(exc),
                                            {"table": table} if table else {}))
                return True
            if env is None:
                self.stopped_at = offset
                return False
            self.records += 1
            self.snapshot_last = self.snapshot_last or is_final_snapshot_record(env.get("source") or {})
            self._read(key, value, env, Position(topic, partition, offset))
            return True
        self.records += 1
        if value is None:
            self.tombstones += 1
            self._tombstone(key, topic, partition, offset)
        elif not self._fast(key, value, topic, partition, offset):
            self._general(dict(key=key, value=value, topic=topic, partition=partition, offset=offset))
        return True

    def _read(self, key: bytes | None, value: bytes, env: dict[str, Any], pos: Position) -> None:
        """A snapshot read, decoded once (no raw bytes kept: each row has one read, so there is
        little to supersede and everything is decoded in the end anyway)."""
        fk = fence_key(pos.topic, pos.partition)
        table = None
        try:
            out = decode(key, value, pos, self.fences.get(fk, 0), truncate_table=self.truncate_table, parsed=env)
            if out is None or isinstance(out, Tombstone):
                return
            table = out.table
            if table not in self.key_columns:
                return   # a captured table this config does not sync
            if self.key_columns[table]:
                out = decode(key, value, pos, self.fences.get(fk, 0), self.key_columns[table], parsed=env)
        except RecordError as exc:
            self.dead.append(DeadLetter(pos, key, value, "decode", str(exc), {"table": table} if table else {}))
            return
        if out.snapshot:
            self.fences[fk] = max(self.fences.get(fk, 0), out.version.lsn)
        fold_into(self.latest, (out,))

    def _fast(self, key: bytes | None, value: bytes, topic: str, partition: int, offset: int) -> bool:
        if key is None or key in self.slow_keys or may_hold_placeholder(value) or b"null" in key:
            return False
        try:
            env = orjson.loads(value)
            src, delete = env["source"], _FAST_OPS[env["op"]]
            table = f"{src.get('schema', 'public')}.{src['table']}"
            if table == self.truncate_table:
                return False
            if table not in self.key_columns:
                return True  # a captured table this config does not sync
            if self.key_columns[table]:
                return False
            fk = fence_key(topic, partition)
            snapshot = is_snapshot(src)
            version = version_of(src, self.fences.get(fk, 0), snapshot)
        except (orjson.JSONDecodeError, KeyError, TypeError, VersionError):
            return False  # the general path decodes it again and dead-letters it with the reason
        if snapshot:
            self.fences[fk] = max(self.fences.get(fk, 0), version.lsn)
        held = self.raw.get(key)
        if held is None or version >= held.version:
            self.raw[key] = _Raw(version, offset, value, delete, topic, partition)
        return True

    def _general(self, r: dict[str, Any]) -> None:
        changes, dead, _, _ = decode_records([r], self.fences, self.key_columns, set(self.key_columns),
                                             truncate_table=self.truncate_table)
        self.dead.extend(dead)
        if r["key"] is not None and changes and changes[0].op != "truncate":
            self._to_slow(r["key"])
        for t in fold_into(self.latest, changes):
            if t.table not in self.truncated or t.version > self.truncated[t.table]:
                self.truncated[t.table] = t.version
            self.latest = {k: c for k, c in self.latest.items() if not self._truncated(c)}
            self.raw = {k: h for k, h in self.raw.items() if not self._truncated_raw(h)}

    def _to_slow(self, key: bytes) -> None:
        """From now on this key folds as `Change`s (e.g. to fill TOAST columns from older rows)."""
        self.slow_keys.add(key)
        held = self.raw.pop(key, None)
        if held is not None:
            fold_into(self.latest, [self._change(key, held)])

    def _change(self, key: bytes, held: _Raw) -> Change:
        ch = decode(key, held.value, Position(held.topic, held.partition, held.offset))
        ch.version = held.version  # as folded: the fence then, not now
        return ch

    def _truncated(self, change: Change) -> bool:
        cut = self.truncated.get(change.table)
        return cut is not None and change.version < cut

    def _truncated_raw(self, held: _Raw) -> bool:
        if not self.truncated:
            return False
        table = self.topic_tables.get(held.topic)
        cut = self.truncated.get(table) if table else None
        return cut is not None and held.version < cut

    def _tombstone(self, key: bytes | None, topic: str, partition: int, offset: int) -> None:
        if key is None:
            return
        held = self.raw.get(key)
        if held is not None and held.offset < offset:
            del self.raw[key]
        table = self.topic_tables.get(topic)
        if table is None or not self.latest:
            return
        try:
            out = decode(key, None, Position(topic, partition, offset))
            assert isinstance(out, Tombstone)
            doc_id = document_id(out.key or {}, self.key_columns.get(table))
        except RecordError:
            return  # custom key columns not in the record key: the op=d record decides
        held_change = self.latest.get((table, doc_id))
        if held_change is not None and held_change.position.offset < offset:
            del self.latest[(table, doc_id)]

    def survivors(self) -> list[Change]:
        """The state to write into a fresh generation: upserts only (nothing there to delete).
        Both paths meet here by document id (deletes too), so a row reached through different key
        encodings still ends as its newest change."""
        final = dict(self.latest)
        fold_into(final, [self._change(key, held) for key, held in self.raw.items() if not self._truncated_raw(held)])
        return [c for c in final.values() if c.op == "upsert" and not self._truncated(c)]


def _snapshot_read(value: bytes | None) -> dict | None:
    """The envelope of a snapshot read (op=r); None for any other record (a change, a tombstone);
    RecordError for one that cannot be decoded (not JSON, not an object)."""
    if value is None:
        return None
    env = envelope_of(value)
    if not isinstance(env, dict):
        raise RecordError("value is not a JSON object")
    return env if env.get("op") == "r" else None


def fold(rows: Iterable[dict[str, Any]], key_columns: dict[str, list[str] | None], topic_tables: dict[str, str],
         chunk: int = 20_000) -> PartitionFold:
    """Fold records of one partition given in offset order (convenience for tests and tools)."""
    f = PartitionFold(key_columns, topic_tables)
    pending: list[dict[str, Any]] = []
    for r in rows:
        pending.append(r)
        if len(pending) >= chunk:
            f.add(pending)
            pending = []
    if pending:
        f.add(pending)
    return f
