"""Property: for any random history of one table (inserts, updates, deletes, primary-key changes,
truncates, unchanged-TOAST placeholders in several types' renderings) spread over three partitions,
with a compacted prefix (tombstone-only deletes), redelivered records and any micro-batch split,
both the live path (parallel partition tasks, truncates in the driver) and the rebuild's fold end
equal to a model of Postgres."""
from __future__ import annotations

import json
import zlib

from hypothesis import HealthCheck, given, settings, strategies as st

from derived.sinks.cache.sink import CacheTable
from derived.sinks.search.sink import SearchTable
from pipelines.apply.batch import ApplyOptions, apply_truncates
from pipelines.apply.stores import Stores
from pipelines.apply.stats import add_stats
from pipelines.spark.partition_apply import apply_rows, stats_of
from pipelines.apply.rebuild_fold import PartitionFold
from tests.support.records import MARKERS
from derived.sinks.memory import VersionedStore
from tests.support.letters import NoLetters

TABLE, PARTS = "public.items", 3
TOPIC, MARKER_TOPIC = f"cdc.{TABLE}", f"cdc.{MARKERS}"
PLACEHOLDERS = ["__debezium_unavailable_value", "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==",
                list(b"__debezium_unavailable_value")]


def partition(key: dict) -> int:
    return zlib.crc32(json.dumps(key, sort_keys=True).encode()) % PARTS


class Unchanged:
    def __init__(self, rendering):
        self.rendering = rendering


@st.composite
def histories(draw):
    """Transactions of ops on ids 1..6; returns (log per topic-partition, the final table)."""
    table: dict[int, dict] = {}
    logs: dict[tuple[str, int], list] = {}
    history: list = []
    lsn = 1000
    commit = 900
    for _ in range(draw(st.integers(1, 14))):
        prev, changes = commit, []
        for _ in range(draw(st.integers(1, 4))):
            lsn += 10
            kind = draw(st.sampled_from(["insert", "update", "toast", "delete", "pk", "truncate"]))
            id_ = draw(st.integers(1, 6))
            if kind == "truncate":
                table.clear()
                changes.append(("marker", lsn, None))
            elif id_ not in table:
                table[id_] = {"id": id_, "n": lsn, "big": f"big{lsn}"}
                changes.append(("c", lsn, dict(table[id_])))
            elif kind == "delete":
                del table[id_]
                changes.append(("d", lsn, {"id": id_}))
            elif kind == "pk":
                new = draw(st.integers(7, 12))
                if new in table:
                    continue
                row = table.pop(id_)
                table[new] = {**row, "id": new}
                changes.append(("d", lsn, {"id": id_}))
                lsn += 1
                # The new key's create: Debezium re-reads an unchanged TOAST value (the reselect
                # post-processor), so it carries the value.
                changes.append(("c", lsn, dict(table[new])))
            else:
                table[id_]["n"] = lsn
                if kind == "update":
                    table[id_]["big"] = f"big{lsn}"
                shown = dict(table[id_])
                if kind == "toast":  # resolved below, as Debezium's reselect would
                    shown["big"] = Unchanged(draw(st.sampled_from(PLACEHOLDERS)))
                changes.append(("u", lsn, shown))
        lsn += 10
        commit = lsn
        history.append((prev, changes))
    # Debezium re-reads an unchanged TOAST value when it emits the event (here: as late as possible,
    # after the whole history): the row's value then, or the placeholder if the row is gone by then.
    for prev, changes in history:
        for op, at, row in changes:
            if row is not None and isinstance(row.get("big"), Unchanged):
                row["big"] = table[row["id"]]["big"] if row["id"] in table else row["big"].rendering
        log_transaction(logs, prev, changes)
    return logs, {str(i): r for i, r in table.items()}


def log_transaction(logs: dict[tuple[str, int], list], prev: int, changes: list) -> None:
    """A committed transaction's changes ((op, lsn, row); op "marker": a truncate) appended to the
    logs as Debezium writes them: a truncate's marker in its own topic, a delete followed by its tombstone."""
    for op, at, row in changes:
        source = {"schema": "public", "table": "items", "lsn": at, "snapshot": "false",
                  "sequence": json.dumps([str(prev), str(at)]), "ts_ms": 1}
        if op == "marker":
            key = {"table_name": TABLE}
            value = {"op": "u", "after": {"table_name": TABLE, "truncated_at": "x"}, "before": None,
                     "source": {**source, "table": MARKERS.split(".")[1]}}
            logs.setdefault((MARKER_TOPIC, partition(key)), []).append((key, value))
            continue
        key = {"id": row["id"]}
        value = {"op": op, "after": None if op == "d" else row, "before": row if op == "d" else None,
                 "source": source}
        log = logs.setdefault((TOPIC, partition(key)), [])
        log.append((key, value))
        if op == "d":
            log.append((key, None))


def compact(log: list, upto: int) -> list[tuple[int, tuple]]:
    """The cleaner over [0, upto): only the last record of each key stays (offsets kept)."""
    last = {json.dumps(k, sort_keys=True): i for i, (k, _) in enumerate(log[:upto])}
    return [(i, r) for i, r in enumerate(log) if i >= upto or last[json.dumps(r[0], sort_keys=True)] == i]


def records(topic, part, entries):
    return [{"key": json.dumps(k).encode(), "value": None if v is None else json.dumps(v).encode(),
             "topic": topic, "partition": part, "offset": off} for off, (k, v) in entries]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(), data=st.data())
def test_live_path_and_rebuild_fold_equal_postgres(history, data):
    logs, want = history
    shown, rebuilt_from = {}, {}
    for (topic, part), log in logs.items():
        # Connect resends a suffix after a crash: the copies follow at new offsets.
        log = log + log[data.draw(st.integers(0, len(log)), label="redelivered from"):]
        if topic == MARKER_TOPIC:
            shown[(topic, part)] = rebuilt_from[(topic, part)] = records(topic, part, list(enumerate(log)))
            continue
        # The cleaner compacts a prefix; the live job had read the log up to `read` before that.
        upto = data.draw(st.integers(0, len(log)), label="compacted prefix")
        read = data.draw(st.integers(0, len(log)), label="read before compaction")
        compacted = compact(log, upto)
        shown[(topic, part)] = (records(topic, part, list(enumerate(log))[:read])
                                + records(topic, part, [(o, r) for o, r in compacted if o >= read]))
        rebuilt_from[(topic, part)] = records(topic, part, compacted)

    # The live path: micro-batches over all partitions, each partition's slice a parallel task (in
    # any order), the batch's truncates applied by the driver after them.
    store = VersionedStore()
    stores = Stores(store, VersionedStore(), {TABLE: SearchTable("items")}, {TABLE: CacheTable("item:{id}")},
                    {TABLE: None}, MARKERS)
    cursors = {tp: 0 for tp in shown}
    known: dict = {}  # the job's TruncateCuts
    while any(cursors[tp] < len(shown[tp]) for tp in shown):
        total = None
        how = ApplyOptions(defer_truncates=True, known_cuts=dict(known))
        order = data.draw(st.permutations(sorted(shown)), label="task order")
        for tp in order:
            step = data.draw(st.integers(1, 5), label="records in this batch")
            chunk = shown[tp][cursors[tp]:cursors[tp] + step]
            cursors[tp] += len(chunk)
            for row in apply_rows([chunk], stores, NoLetters(), {}, how=how):
                s = stats_of(row)
                total = s if total is None else (add_stats(total, s) or total)
        if total is not None and total.truncate_cuts:
            apply_truncates(stores, total.truncate_cuts)
            known.update({t: v for t, v in total.truncate_cuts.items() if t not in known or v > known[t]})
    assert store.rows() == want

    # The rebuild: the marker topic read first, every table partition folded from those cuts.
    from pipelines.apply.batch import newest_cuts
    from connectors.envelope import decode_records

    marker_rows = [r for (topic, _), rows in rebuilt_from.items() if topic == MARKER_TOPIC for r in rows]
    truncates = [c for c in decode_records(marker_rows, {}, {TABLE: None}, {TABLE}, None, MARKERS)[0]
                 if c.op == "truncate"]
    cuts = newest_cuts(truncates)
    rebuilt = {}
    for (topic, part), rows in rebuilt_from.items():
        if topic != TOPIC:
            continue
        fold = PartitionFold({TABLE: None}, {TOPIC: TABLE}, truncated=dict(cuts), truncate_table=MARKERS)
        fold.add(rows)
        rebuilt.update({c.doc_id: c.row for c in fold.survivors()})
    assert rebuilt == want
