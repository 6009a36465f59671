"""The nested documents' state under churn (issue #38.8): its size and per-batch cost at 10x the
nested-documents benchmark (50,000 orders, 250,000 lines), with the state forgetting deleted rows
(`NestedState.prune`, what the fold does) and, for comparison, keeping them (before the fix).

What a batch costs the documents' query beside the Spark machinery: the state unpickled, the batch
folded, the state pickled again (pipelines/documents/documents_query.fold_fn times the same three).
The load is Debezium-shaped records through `fold_batch`, no server: the initial snapshot in batches,
then churn batches in which orders come and go with their lines (inserted, updated, deleted) at a
steady live size.

    .venv/bin/python benchmarks/nested_state_churn.py [--orders 50000] [--batch 3000] [--churn-batches 40]
                                                      [--variants paused,on,keep,all] [--wide 0]
"""
from __future__ import annotations

import argparse
import json
import pickle
import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import write_result  # noqa: E402
from derived.nested import DocumentSpec, NestedState, Relation  # noqa: E402
from pipelines.documents.nested_fold import FoldState, fold_batch  # noqa: E402
from pipelines.spark.worker_context import collector_paused  # noqa: E402

LINES = 5


class Records:
    """Debezium records for orders and lines, partitioned by key as Debezium's producer does."""

    def __init__(self, partitions: int = 3, wide: int = 0):
        # columns no document shows (a real table's audit fields, notes, ...): `wide` of them per row
        self.extra = {f"extra_{i}": f"not shown {i:02d}" for i in range(wide)}
        self.offsets: dict[tuple[str, int], int] = {}
        self.partitions = partitions
        self.commit = 1_000

    def _record(self, table: str, key: dict, op: str, row: dict | None, snapshot: bool, prev: int, lsn: int) -> list[dict]:
        topic = f"cdc.public.{table}"
        part = hash(json.dumps(key)) % self.partitions
        source = {"schema": "public", "table": table, "lsn": lsn, "snapshot": "true" if snapshot else "false",
                  "ts_ms": 1, "sequence": json.dumps([None if snapshot else str(prev), str(lsn)])}
        out = []
        for value in (json.dumps({"op": op, "before": key if op == "d" else None, "after": row, "source": source,
                                  "ts_ms": 1}).encode(), None if op == "d" else False):
            if value is False:
                break
            o = self.offsets.get((topic, part), 0)
            self.offsets[(topic, part)] = o + 1
            out.append({"key": json.dumps(key).encode(), "value": value, "topic": topic, "partition": part,
                        "offset": o})
        return out

    def order(self, oid: int, op: str, snapshot: bool = False) -> list[dict]:
        self.commit += 20
        row = None if op == "d" else {"id": oid, "customer_id": oid % 97, "status": "placed", "total": "12.50"}
        out = self._record("orders", {"id": oid}, op, row, snapshot, self.commit - 20, self.commit)
        for n in range(LINES):
            lid = oid * LINES + n
            self.commit += 1
            line = None if op == "d" else {"id": lid, "order_id": oid, "line_no": n, "sku": f"sku-{lid}", "qty": n,
                                           **self.extra}
            out += self._record("lines", {"id": lid}, op, line, snapshot, self.commit - 21, self.commit)
        return out

    def update_line(self, oid: int, n: int, seq: int) -> list[dict]:
        self.commit += 20
        lid = oid * LINES + n
        row = {"id": lid, "order_id": oid, "line_no": n, "sku": f"sku-{lid}-{seq}", "qty": seq % 9, **self.extra}
        return self._record("lines", {"id": lid}, "u", row, False, self.commit - 20, self.commit)


class AllColumns(NestedState):
    """The state before it held only what the documents need: every column of every row."""

    def _kept_columns(self) -> dict:
        return {}


class KeepDeleted(NestedState):
    """The state before the fix: deleted rows kept for good."""

    def prune(self) -> int:
        return 0


def run(orders: int, batch: int, churn_batches: int, prune: bool, collector_on: bool = False, wide: int = 0,
        all_columns: bool = False) -> dict:
    spec = DocumentSpec("orders", "public.orders", None, (
        Relation("lines", "public.lines", "one_to_many", (("order_id", "id"),), ("line_no", "sku", "qty"), "line_no"),))
    cls = AllColumns if all_columns else NestedState if prune else KeepDeleted
    model = cls(spec, {"public.orders": ("id",), "public.lines": ("id",)})
    state = FoldState(model)
    recs = Records(wide=wide)
    blob = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)

    def one(records: list[dict]) -> dict:
        nonlocal blob
        with nullcontext() if collector_on else collector_paused():   # as fold_fn does
            t0 = time.perf_counter()
            held = pickle.loads(blob)
            t1 = time.perf_counter()
            fold_batch(held, records, {}, None, {})
            t2 = time.perf_counter()
            blob = pickle.dumps(held, protocol=pickle.HIGHEST_PROTOCOL)
            t3 = time.perf_counter()
        return {"load_s": t1 - t0, "fold_s": t2 - t1, "save_s": t3 - t2, "state_mb": len(blob) / 1e6,
                "rows": sum(len(r) for r in held.model.rows.values())}

    pending: list[dict] = []
    for oid in range(orders):                    # the snapshot, `batch` records at a time
        pending += recs.order(oid, "c", snapshot=True)
        if len(pending) >= batch:
            one(pending)
            pending = []
    if pending:
        one(pending)
    after_snapshot = len(blob) / 1e6
    # Churn: each batch deletes the oldest live orders (with their lines), inserts as many new ones, and
    # updates lines of live ones; the live data stays `orders` orders.
    oldest, newest, seq, figures = 0, orders, 0, []
    per_order = 2 * (1 + LINES) + LINES          # a delete (+tombstones) and an insert, records each
    for _ in range(churn_batches):
        records: list[dict] = []
        for _ in range(batch // (2 * per_order)):
            records += recs.order(oldest, "d")
            records += recs.order(newest, "c")
            oldest, newest = oldest + 1, newest + 1
        while len(records) < batch:
            seq += 1
            records += recs.update_line(oldest + seq % (newest - oldest), seq % LINES, seq)
        figures.append(one(records))
    last = figures[-5:]
    return {
        "prune": prune, "collector": "on" if collector_on else "paused", "wide": wide,
        "columns_held": "all" if all_columns else "needed", "state_mb_after_snapshot": round(after_snapshot, 1),
        "state_mb_end": round(figures[-1]["state_mb"], 1), "rows_held_end": figures[-1]["rows"],
        "live_rows": orders * (1 + LINES), "orders_churned": oldest,
        "batch_s_median_last5": round(statistics.median(f["load_s"] + f["fold_s"] + f["save_s"] for f in last), 3),
        "load_s": round(statistics.median(f["load_s"] for f in last), 3),
        "fold_s": round(statistics.median(f["fold_s"] for f in last), 3),
        "save_s": round(statistics.median(f["save_s"] for f in last), 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--orders", type=int, default=50_000)
    ap.add_argument("--batch", type=int, default=3_000)
    ap.add_argument("--churn-batches", type=int, default=40)
    ap.add_argument("--variants", default="paused,on,keep",
                    help="paused: what the fold does; on: the garbage collector left on (before it was paused); "
                         "keep: deleted rows kept (before pruning); all: every column held (before only the "
                         "needed ones were)")
    ap.add_argument("--wide", type=int, default=0, help="columns per line no document shows")
    args = ap.parse_args()
    out = {"orders": args.orders, "lines": args.orders * LINES, "records_per_batch": args.batch,
           "churn_batches": args.churn_batches, "runs": []}
    for variant in args.variants.split(","):
        r = run(args.orders, args.batch, args.churn_batches, prune=variant != "keep", collector_on=variant == "on",
                wide=args.wide, all_columns=variant == "all")
        print(json.dumps(r), flush=True)
        out["runs"].append(r)
    write_result("nested_state_churn", out)


if __name__ == "__main__":
    main()
