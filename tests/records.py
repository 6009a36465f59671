"""Debezium-shaped records built by hand: for logs in shapes Debezium would not produce on demand
(compacted ones: Tansu never compacts)."""
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


def rec(offset: int, k: bytes | None, v: bytes | None, topic: str = TOPIC, partition: int = 0) -> dict[str, Any]:
    return {"key": k, "value": v, "topic": topic, "partition": partition, "offset": offset}
