"""Property: a bootstrap whose snapshot reads go through the bulk (rounds over growing ends, a
chunk at a time, each partition stopped at its first record that is not a read) and whose
streaming query then starts where the bulk stopped, with the bulk's fences, ends equal to a model
of Postgres: for any table at the snapshot, changes made during and after it (inserts, updates,
deletes, primary-key changes, truncates) over three partitions, a compacted prefix and a
redelivered suffix."""
from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings, strategies as st

from connectors.envelope import fence_key
from derived.sinks.cache.sink import CacheTable
from derived.sinks.memory import VersionedStore
from derived.sinks.search.sink import SearchTable
from pipelines.apply.batch import ApplyOptions, apply_changes, apply_truncates
from pipelines.apply.snapshot_reads import SnapshotReads
from pipelines.apply.stats import BatchStats, add_stats
from pipelines.apply.stores import Stores
from pipelines.spark.partition_apply import apply_rows, stats_of
from tests.support.letters import NoLetters
from tests.support.records import MARKERS
from tests.unit.pipelines.apply.test_live_and_rebuild_model import TABLE, TOPIC, compact, log_transaction, partition

SNAPSHOT_LSN = 500


class Message:
    """What confluent-kafka hands the bulk: key(), value(), offset()."""

    def __init__(self, row: dict):
        self.row = row

    def key(self):
        return self.row["key"]

    def value(self):
        return self.row["value"]

    def offset(self):
        return self.row["offset"]


@st.composite
def histories(draw):
    """(log per topic-partition, the final table): the snapshot's reads of the table as it stood,
    then committed transactions of changes."""
    table = {i: {"id": i, "n": i} for i in range(1, draw(st.integers(0, 8)) + 1)}
    logs: dict[tuple[str, int], list] = {}
    reads = sorted(table)
    for n, i in enumerate(reads):
        src = {"schema": "public", "table": "items", "lsn": SNAPSHOT_LSN, "ts_ms": 1,
               "snapshot": "last" if n == len(reads) - 1 else "true", "sequence": json.dumps([None, str(SNAPSHOT_LSN)])}
        key = {"id": i}
        logs.setdefault((TOPIC, partition(key)), []).append((key, {"op": "r", "after": dict(table[i]),
                                                                   "before": None, "source": src}))
    lsn, commit = 1000, 900
    for _ in range(draw(st.integers(0, 10))):
        prev, changes = commit, []
        for _ in range(draw(st.integers(1, 3))):
            lsn += 10
            kind = draw(st.sampled_from(["insert", "update", "delete", "pk", "truncate"]))
            id_ = draw(st.integers(1, 10))
            if kind == "truncate":
                table.clear()
                changes.append(("marker", lsn, None))
            elif id_ not in table:
                table[id_] = {"id": id_, "n": lsn}
                changes.append(("c", lsn, dict(table[id_])))
            elif kind == "delete":
                del table[id_]
                changes.append(("d", lsn, {"id": id_}))
            elif kind == "pk":
                new = draw(st.integers(11, 14))
                if new in table:
                    continue
                table[new] = {**table.pop(id_), "id": new}
                changes.append(("d", lsn, {"id": id_}))
                lsn += 1
                changes.append(("c", lsn, dict(table[new])))
            else:
                table[id_]["n"] = lsn
                changes.append(("u", lsn, dict(table[id_])))
        lsn += 10
        commit = lsn
        log_transaction(logs, prev, changes)
    return logs, {str(i): r for i, r in table.items()}


def rows_of(topic: str, part: int, entries) -> list[dict]:
    return [{"key": json.dumps(k).encode(), "value": None if v is None else json.dumps(v).encode(),
             "topic": topic, "partition": part, "offset": off} for off, (k, v) in entries]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(), data=st.data())
def test_bulk_then_streaming_equals_postgres(history, data):
    logs, want = history
    topics: dict[tuple[str, int], list[dict]] = {}
    for (topic, part), log in logs.items():
        log = log + log[data.draw(st.integers(0, len(log)), label="redelivered from"):]   # Connect resends
        upto = data.draw(st.integers(0, len(log)), label="compacted prefix")
        topics[(topic, part)] = rows_of(topic, part, compact(log, upto) if topic == TOPIC else list(enumerate(log)))

    store = VersionedStore()
    stores = Stores(store, VersionedStore(), {TABLE: SearchTable("items")}, {TABLE: CacheTable("item:{id}")},
                    {TABLE: None}, MARKERS)

    def write(fold) -> None:
        apply_changes(stores, [], fold.survivors(), BatchStats(), list(fold.dead), [])

    # The bulk: rounds, each over every partition not stopped, from where it reached to an end that
    # grows as Debezium writes; a task's fences start empty, the driver keeps the highest.
    reached = {tp: 0 for tp in topics}
    stopped: set = set()
    fences: dict[str, int] = {}
    for _ in range(data.draw(st.integers(1, 4), label="rounds")):
        for tp, rows in topics.items():
            if tp in stopped:
                continue
            end = data.draw(st.integers(reached[tp], len(rows)), label="round end")
            reads = SnapshotReads({TABLE: None}, {TOPIC: TABLE}, write, MARKERS,
                                  chunk=data.draw(st.integers(1, 4), label="chunk"))
            part = rows[reached[tp]:end]   # positions in the log's list (offsets have gaps after compaction)
            for first in range(0, len(part), 2):
                if not reads.add(tp[0], tp[1], [Message(r) for r in part[first:first + 2]]):
                    break
            reads.finish()
            if reads.stopped_at is not None:
                reached[tp] = next(i for i, r in enumerate(rows) if r["offset"] == reads.stopped_at)
                stopped.add(tp)
            else:
                reached[tp] = end
            key = fence_key(*tp)
            if reads.fences.get(key):
                fences[key] = max(fences.get(key, 0), reads.fences[key])

    # The streaming query from the hand-over, with the bulk's fences: micro-batches over all
    # partitions, the batch's truncates applied after its tasks.
    known: dict = {}
    cursors = dict(reached)
    state = dict(fences)
    while any(cursors[tp] < len(topics[tp]) for tp in topics):
        total = None
        how = ApplyOptions(defer_truncates=True, known_cuts=dict(known))
        for tp in data.draw(st.permutations(sorted(topics)), label="task order"):
            chunk = topics[tp][cursors[tp]:cursors[tp] + data.draw(st.integers(1, 5), label="batch size")]
            cursors[tp] += len(chunk)
            for row in apply_rows([chunk], stores, NoLetters(), state, how=how):
                s = stats_of(row)
                total = s if total is None else (add_stats(total, s) or total)
        if total is not None and total.truncate_cuts:
            apply_truncates(stores, total.truncate_cuts)
            known.update({t: v for t, v in total.truncate_cuts.items() if t not in known or v > known[t]})
    assert store.rows() == want


def test_a_change_or_tombstone_stops_the_reads_and_an_undecodable_record_is_a_dead_letter():
    written = []
    read = json.dumps({"op": "r", "after": {"id": 1}, "before": None,
                       "source": {"schema": "public", "table": "items", "lsn": 5, "snapshot": "true", "ts_ms": 1,
                                  "sequence": json.dumps([None, "5"])}}).encode()
    wrapped = json.dumps({"schema": {}, "payload": json.loads(read)}).encode()
    update = read.replace(b'"op": "r"', b'"op": "u"')
    for stopper in (update, None, json.dumps({"schema": {}, "payload": json.loads(update)}).encode()):
        reads = SnapshotReads({TABLE: None}, {TOPIC: TABLE}, lambda f: written.append(len(f.survivors())))
        rows = [{"key": b'{"id": 1}', "value": read, "offset": 3}, {"key": b'{"id": 2}', "value": wrapped, "offset": 4},
                {"key": b'{"id": 3}', "value": stopper, "offset": 7}, {"key": b'{"id": 4}', "value": read, "offset": 8}]
        assert reads.add(TOPIC, 0, [Message(r) for r in rows]) is False
        reads.finish()
        assert (reads.stopped_at, reads.reads) == (7, 2)
    # An undecodable record: a dead letter with its reason, and the snapshot's reads after it applied
    # (stopping there left them to a stream that `bootstrap --once` never runs).
    later = read.replace(b'"id": 1}', b'"id": 4}', 1)
    for garbage in (b"{not json", b'"a string"', b"[1, 2]"):
        folds = []
        reads = SnapshotReads({TABLE: None}, {TOPIC: TABLE}, folds.append)
        rows = [{"key": b'{"id": 1}', "value": read, "offset": 3}, {"key": b'{"id": 3}', "value": garbage, "offset": 7},
                {"key": b'{"id": 4}', "value": later, "offset": 8}]
        assert reads.add(TOPIC, 0, [Message(r) for r in rows]) is True
        reads.finish()
        assert reads.stopped_at is None and reads.reads == 3
        dead = [d for f in folds for d in f.dead]
        assert [(d.position.offset, d.value, d.stage, d.extra) for d in dead] == [(7, garbage, "decode", {"table": TABLE})]
        assert sorted(c.doc_id for f in folds for c in f.survivors()) == ["1", "4"]


def test_the_final_snapshot_record_is_noted_in_whichever_chunk_it_comes():
    def read(n: int, marker: str) -> dict:
        value = json.dumps({"op": "r", "after": {"id": n}, "before": None, "source": {
            "schema": "public", "table": "items", "lsn": 5, "snapshot": marker, "ts_ms": 1,
            "sequence": json.dumps([None, "5"])}}).encode()
        return {"key": json.dumps({"id": n}).encode(), "value": value, "offset": n}

    for chunk in (1, 2, 10):
        reads = SnapshotReads({TABLE: None}, {TOPIC: TABLE}, lambda f: None, chunk=chunk)
        reads.add(TOPIC, 0, [Message(read(1, "first")), Message(read(2, "true"))])
        reads.finish()
        assert reads.saw_last is False
        reads.add(TOPIC, 0, [Message(read(3, "true")), Message(read(4, "last"))])
        reads.finish()
        assert reads.saw_last is True and reads.reads == 4
