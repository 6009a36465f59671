"""Raw Kafka records of change topics to `Change`s, in offset order per partition, advancing each
partition's snapshot fence as they go. Pure: no I/O."""
from __future__ import annotations

from typing import Any, Iterable

from connectors.envelope import RecordError, Tombstone, decode, document_id
from derived.change import UNKNOWN, Change, DeadLetter, Position
from pipelines.state.fences import fence_key


def table_of_topic(topic: str) -> str:
    """`<prefix>.<schema>.<table>` -> schema.table (table names have no dots: see config)."""
    return ".".join(topic.rsplit(".", 2)[-2:])


def _tombstone_delete(t: Tombstone, table: str, key_columns: list[str] | None) -> Change | None:
    try:
        doc_id = document_id(t.key, key_columns)
    except RecordError:
        return None  # custom key columns the record key lacks: only the op=d record can tell
    return Change(table, "delete", t.key, doc_id, None, UNKNOWN, t.position, tombstone=True)


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
    for r in sorted(rows, key=lambda r: (r["topic"], r["partition"], r["offset"])):
        pos = Position(r["topic"], r["partition"], r["offset"])
        fk = fence_key(pos.topic, pos.partition)
        try:
            table_hint = None
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
            if key_columns.get(out.table) and out.op != "truncate":
                out = decode(r["key"], r["value"], pos, fences.get(fk, 0), key_columns[out.table])
        except RecordError as exc:
            dead.append(DeadLetter(pos, r["key"], r["value"], "decode", str(exc),
                                   {"table": table_hint} if table_hint else {}))
            continue
        if out.snapshot:
            fences[fk] = max(fences.get(fk, 0), out.version.lsn)
        changes.append(out)
    return changes, dead, tombstones, snapshot_last_lsn
