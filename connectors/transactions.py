"""Debezium's transaction metadata (`provide.transaction.metadata`): which transaction a streamed
change belongs to, and how many changes of each table that transaction produced.

Every streamed change carries `"transaction": {"id": ..., "total_order": ..., "data_collection_order": ...}`
and the transaction topic (`<prefix>.transaction`, one partition, so in commit order) gets a BEGIN
and an END record per transaction that changed a captured table; END carries the count of changes
per table (`data_collections`). Tombstones are not counted. Snapshot reads belong to no transaction.
The nested documents use it to fold whole transactions only (pipelines/apply/transaction_gate.py).

The Postgres connector's ids are `<xid>:<lsn>` with the lsn of the event at hand (seen on Debezium
3.7: BEGIN `737:26413912`, END `737:26414048`, a change of it `737:<its own lsn>`), so a transaction
is known by the part before the colon, Postgres' transaction id."""
from __future__ import annotations

from dataclasses import dataclass

import orjson

from connectors.envelope import RecordError, envelope_of

_TX = b'"transaction":'
_ID = b'{"id":"'
_SNAPSHOT = b'"snapshot":"'


@dataclass(frozen=True)
class TransactionEnd:
    id: str
    counts: dict[str, int]     # schema.table -> changes of it in the transaction
    ts_ms: int


def transaction_of(value: bytes | None) -> str | None:
    """The transaction id of a streamed change record (a JSON envelope without schemas); None for
    a tombstone, a snapshot read, or a record without transaction metadata.

    Found by position, without parsing the record a second time: the converter writes the envelope's
    fields in schema order (before, after, source, transaction, op, ...), and a quote inside any
    value is escaped, so the last unescaped `"transaction":` is the envelope's own, and the last
    `"snapshot":"` is the source block's."""
    if not value or b'"transaction"' not in value:
        return None
    at = value.rfind(_TX)
    if at < 0:
        return _parsed(value)     # not the converter's compact JSON: parse it
    start = at + len(_TX)
    if value.startswith(b"null", start):
        return None
    snap = value.rfind(_SNAPSHOT, 0, at)
    if not value.startswith(_ID, start) or snap < 0:
        return _parsed(value)
    if not value.startswith(b"false", snap + len(_SNAPSHOT)):
        return None       # a snapshot read: belongs to no transaction
    begin = start + len(_ID)
    end = value.find(b'"', begin)
    return _xid(value[begin:end].decode()) if end > begin else _parsed(value)


def _parsed(value: bytes) -> str | None:
    try:
        env = orjson.loads(value)
        tx, source = env.get("transaction"), env.get("source") or {}
    except (orjson.JSONDecodeError, AttributeError):
        return None
    if not isinstance(tx, dict) or tx.get("id") is None or str(source.get("snapshot", "false")) != "false":
        return None
    return _xid(str(tx["id"]))


def _xid(tx_id: str) -> str:
    """The transaction of a Debezium transaction id (`<xid>:<lsn>` from the Postgres connector)."""
    return tx_id.split(":", 1)[0]


def transaction_end(value: bytes | None) -> TransactionEnd | None:
    """An END record of the transaction topic; None for BEGIN or anything else."""
    if not value:
        return None
    try:
        body = envelope_of(value)   # a schema/payload wrapper taken off
    except RecordError:
        return None
    if not isinstance(body, dict) or body.get("status") != "END" or body.get("id") is None:
        return None
    counts: dict[str, int] = {}
    for dc in body.get("data_collections") or []:
        if isinstance(dc, dict) and dc.get("data_collection"):
            counts[str(dc["data_collection"])] = counts.get(str(dc["data_collection"]), 0) + int(dc.get("event_count") or 0)
    return TransactionEnd(_xid(str(body["id"])), counts, int(body.get("ts_ms") or 0))
