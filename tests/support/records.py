"""Debezium-shaped records built by hand: for log shapes that are hard to produce on demand (a
given interleaving over partitions, a compaction at a given moment); tests/integration has twins
on logs the broker compacted itself."""
from __future__ import annotations

import json
from typing import Any

TOPIC = "cdc.public.items"


def key(id_: int) -> bytes:
    return json.dumps({"id": id_}).encode()


def value(op: str, id_: int, lsn: int, name: str | None = None, prev_commit: int | None = None,
          table: str = "items", snapshot: str = "false") -> bytes:
    """An envelope for `op` (c/u/r/d/t) at `lsn`; `prev_commit` is sequence[0] (None for a read)."""
    row = None if op in ("d", "t") else {"id": id_, "name": name if name is not None else f"n{id_}@{lsn}"}
    before = {"id": id_} if op == "d" else None
    seq = [None if prev_commit is None else str(prev_commit), str(lsn)]
    return json.dumps({"op": op, "after": row, "before": before, "ts_ms": 1,
                       "source": {"schema": "public", "table": table, "lsn": lsn, "snapshot": snapshot,
                                  "ts_ms": 1, "sequence": json.dumps(seq)}}).encode()


MARKERS = "public.cdckit_truncates"


def truncate_marker(lsn: int, prev_commit: int, table: str = "public.items", op: str = "u",
                    snapshot: str = "false") -> tuple[bytes, bytes]:
    """(key, value) of a truncate marker row (connectors/postgres.py) for `table` at `lsn`."""
    seq = [str(prev_commit), str(lsn)]
    row = {"table_name": table, "truncated_at": "2026-11-23T10:00:00Z"}
    return (json.dumps({"table_name": table}).encode(),
            json.dumps({"op": op, "after": None if op == "d" else row, "before": row if op == "d" else None,
                        "ts_ms": 1, "source": {"schema": "public", "table": MARKERS.split(".")[1], "lsn": lsn,
                                               "snapshot": snapshot, "ts_ms": 1, "sequence": json.dumps(seq)}}
                       ).encode())


def rec(offset: int, k: bytes | None, v: bytes | None, topic: str = TOPIC, partition: int = 0) -> dict[str, Any]:
    return {"key": k, "value": v, "topic": topic, "partition": partition, "offset": offset}


class KafkaMessage:
    """What confluent-kafka's consumer hands out: key(), value(), offset(), timestamp() (type, ms)."""

    def __init__(self, offset: int, value: bytes | None, ts: int = 1_700_000_000_123, key: bytes = b'{"id":1}'):
        self._offset, self._value, self._ts, self._key = offset, value, ts, key

    def key(self):
        return self._key

    def value(self):
        return self._value

    def offset(self):
        return self._offset

    def timestamp(self):
        return (1, self._ts)
