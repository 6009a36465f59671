"""Fault drills: a steady write workload, a fault, recovery, then the stores are compared with
Postgres. Each drill appends its line (changes written, lost, stale, resurrected) to a results file
that `scripts/drills` prints as a table."""
from __future__ import annotations

import json
import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import psycopg

from tests.support.integration import diff_stores, pg
from tests.support.stack import ROOT, Endpoints

RESULTS = Path(os.environ.get("CDCKIT_DRILL_RESULTS", ROOT / ".drills" / "results.jsonl"))


class Workload:
    """Transactions of an update, a delete and an insert (fresh ids: a deleted id never returns, so
    any deleted id found in a store was resurrected). Survives Postgres going away and coming back."""

    # 20 transactions/s (60 changes/s): load enough for every fault to land mid-stream; at 40 the
    # drills spent their time catching up with a backlog two cores could barely follow.
    started = 0   # workloads so far in this process: each draws its own victims

    def __init__(self, stack: Endpoints, table: str, rows: int, tx_per_s: float = 20, first_new_id: int = 1_000_000):
        self.stack, self.table, self.rows, self.pause = stack, table, rows, 1 / tx_per_s
        # One seed for all made every drill on a shared table delete the rows the drills before it
        # had deleted already: later drills deleted nothing, and their resurrection check proved little.
        Workload.started += 1
        self.seed = 5 + Workload.started
        self.first_new_id = rows + first_new_id
        self.stop_flag = threading.Event()
        self.written = 0
        self.deleted: set[str] = set()
        self.errors = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "Workload":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stop_flag.set()
        self.thread.join()

    def _run(self) -> None:
        rnd = random.Random(self.seed)
        next_id = self.first_new_id
        conn = None
        while not self.stop_flag.is_set():
            try:
                if conn is None:
                    conn = pg(self.stack)
                victim = rnd.randint(1, self.rows)
                with conn.transaction():
                    conn.execute(f"UPDATE {self.table} SET n = n + 1, name = 'u' || n WHERE id = %s",
                                 (rnd.randint(1, self.rows),))
                    gone = conn.execute(f"DELETE FROM {self.table} WHERE id = %s RETURNING id", (victim,)).fetchall()
                    conn.execute(f"INSERT INTO {self.table} VALUES (%s, 'new', 0)", (next_id,))
                next_id += 1
                self.written += 3
                self.deleted.update(str(r[0]) for r in gone)
            except psycopg.OperationalError:
                self.errors += 1
                conn = None
                time.sleep(0.5)
            time.sleep(self.pause)
        if conn is not None:
            conn.close()


def outcome(stack: Endpoints, table: str, key_prefix: str, index: str, deleted: set[str]) -> dict[str, Any]:
    d = diff_stores(stack, table, key_prefix, index)
    extra = set(d["cache_extra"]) | set(d["search_extra"])
    return {"lost": len(set(d["cache_missing"]) | set(d["search_missing"])),
            "stale": len(set(d["cache_stale"]) | set(d["search_stale"])),
            "resurrected": len(extra & deleted), "other_extra": len(extra - deleted)}


def converged(stack: Endpoints, table: str, key_prefix: str, index: str, deleted: set[str],
              timeout_s: float = 180) -> dict[str, Any]:
    """The outcome once the stores stop differing (or the last one seen when the time is up)."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = outcome(stack, table, key_prefix, index, deleted)
        if not any(result.values()) or time.monotonic() > deadline:
            return result
        time.sleep(2)


def record(drill: str, written: int, result: dict[str, Any], **extra: Any) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with open(RESULTS, "a") as f:
        f.write(json.dumps({"drill": drill, "written": written, **result, **extra, "at": time.time()}) + "\n")


def table(path: Path = RESULTS) -> str:
    """The drills' results as a text table (the last run of each drill)."""
    rows: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            r = json.loads(line)
            rows[r["drill"]] = r
    head = f"{'drill':<50} {'written':>8} {'lost':>5} {'stale':>6} {'resurrected':>12} {'verify':>7}"
    lines = [head, "-" * len(head)]
    for r in rows.values():
        lines.append(f"{r['drill']:<50} {r['written']:>8} {r['lost']:>5} {r['stale']:>6} {r['resurrected']:>12} "
                     f"{'exact' if r.get('verify_exact', True) else 'DIFF':>7}")
    if not rows:
        lines.append("(no drill ran)")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
