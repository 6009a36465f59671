"""Whole transactions into the nested documents (issue #38.9), without Spark: random transactional
histories (test_nested_fold's, plus transactions that change two lines of one order) as Debezium
records with transaction metadata, delivered with partitions interleaved at random and the END
records anywhere among them, cut into batches, some crashed half-written and run again. After
every batch the store must show the documents of one committed state of the database: never part
of a transaction, never a later transaction without an earlier one."""
from __future__ import annotations

import copy
import json
import pickle
import random
import zlib
from typing import Any

from hypothesis import given, settings, strategies as st

from connectors.transactions import transaction_end, transaction_of
from derived.nested import NestedState
from pipelines.documents.nested_fold import FoldState, fold_batch
from pipelines.apply.transaction_gate import LATE_MS, TransactionGate
from tests.unit.pipelines.documents.test_nested_fold import (
    KEYS, MARKERS, P, PARTITIONS, SPEC, Log, deliveries, history, joined, visible, write,
)

TX_TOPIC = f"{P}.transaction"
GATED = frozenset(f"{P}.{t}" for t in [*KEYS, MARKERS])
STEP_MS = 100


class TxLog(Log):
    """The records Debezium writes with `provide.transaction.metadata`: a transaction block in every
    streamed change, an END per transaction (one partition), record timestamps."""

    def __init__(self):
        super().__init__()
        self.parts[(TX_TOPIC, 0)] = []
        self.clock = 1_000_000
        self.tx = 500
        self.lsn_seen = 0

    def _append(self, topic: str, key: dict, value: bytes | None) -> None:
        if value is not None:
            env = json.loads(value)
            # the Postgres connector's id: xid and the lsn of the event at hand (another for each record)
            self.lsn_seen += 7
            env["transaction"] = {"id": f"{self.tx}:{self.lsn_seen}", "total_order": 1, "data_collection_order": 1}
            value = json.dumps(env).encode()
            self.counts[topic[len(P) + 1:]] = self.counts.get(topic[len(P) + 1:], 0) + 1
        super()._append(topic, key, value)
        part = zlib.crc32(json.dumps(key, sort_keys=True).encode()) % PARTITIONS   # as Log puts it
        self.parts[(topic, part)][-1]["timestamp"] = self.clock

    def _wrap(self, emit) -> None:
        self.counts: dict[str, int] = {}
        self.tx += 1
        self.clock += STEP_MS
        begin_commit = self.commit
        emit()
        end = {"status": "END", "id": f"{self.tx}:{begin_commit + 3}", "event_count": sum(self.counts.values()),
               "data_collections": [{"data_collection": t, "event_count": n} for t, n in self.counts.items()],
               "ts_ms": self.clock}
        records = self.parts[(TX_TOPIC, 0)]
        records.append({"key": json.dumps({"id": end["id"]}).encode(), "value": json.dumps(end).encode(),
                        "topic": TX_TOPIC, "partition": 0, "offset": len(records), "timestamp": self.clock})

    def txn(self, changes) -> None:
        self._wrap(lambda: Log.txn(self, changes))

    def truncate(self, table: str) -> None:
        self._wrap(lambda: Log.truncate(self, table))


def gated_state() -> FoldState:
    return FoldState(NestedState(SPEC, dict(KEYS)), gate=TransactionGate(P, GATED, TX_TOPIC))


def two_lines(rnd: random.Random, log: TxLog, db: dict) -> None:
    """One transaction changes two lines of one order (the benchmark's torn case)."""
    by_order: dict[Any, list] = {}
    for key, row in db["public.lines"].items():
        by_order.setdefault(row["order_id"], []).append(key)
    pairs = [keys for keys in by_order.values() if len(keys) >= 2]
    if not pairs:
        return
    a, b = rnd.sample(sorted(rnd.choice(pairs)), 2)
    mark = f"t{rnd.randint(1, 999)}"
    changes = []
    for key in (a, b):
        db["public.lines"][key] = {**db["public.lines"][key], "sku": mark}
        changes.append(("public.lines", "u", dict(db["public.lines"][key])))
    log.txn(changes)


def committed_states(rnd: random.Random, steps: int) -> tuple[TxLog, list[dict]]:
    """The log, and the documents of every committed state of the database in commit order."""
    log, db = TxLog(), {t: {} for t in KEYS}
    states = [joined(db)]
    for _ in range(steps):
        if rnd.random() < 0.3:
            two_lines(rnd, log, db)
        else:
            history(rnd, 1, log, db)
        states.append(joined(copy.deepcopy(db)))
    return log, states


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 100_000), st.integers(5, 70))
def test_every_batch_leaves_the_documents_of_one_committed_state(seed: int, steps: int):
    rnd = random.Random(seed)
    log, states = committed_states(rnd, steps)
    state, store = gated_state(), {}
    reached = 0
    for batch in deliveries(log, rnd):
        saved = pickle.dumps(state)
        if rnd.random() < 0.2:    # a crash after part of the writes: run again from the state before
            write(store, fold_batch(state, batch, {}, MARKERS, {})[0][:1])
            state = pickle.loads(saved)
        outs, _, dead = fold_batch(state, batch, {}, MARKERS, {})
        assert not dead
        write(store, outs)
        seen = visible(store)
        # one committed state, and never an older one than the store showed before
        matches = [k for k in range(reached, len(states)) if states[k] == seen]
        assert matches, f"the documents after a batch are no committed state of the database: {seen}"
        reached = matches[0]
    assert visible(store) == states[-1]
    assert not state.gate.held and not state.gate.ends


def test_without_the_gate_a_document_shows_half_a_transaction():
    """What the gate is for: the same deliveries folded as read show a state the database never had."""
    torn = 0
    for seed in range(40):
        rnd = random.Random(seed)
        log, states = committed_states(rnd, 40)
        state, store = FoldState(NestedState(SPEC, dict(KEYS))), {}
        for batch in deliveries(log, rnd):
            write(store, fold_batch(state, [r for r in batch if r["topic"] != TX_TOPIC], {}, MARKERS, {})[0])
            torn += visible(store) not in states
    assert torn > 0


def _two_line_order() -> tuple[TxLog, list[dict]]:
    log = TxLog()
    log.txn([("public.orders", "c", {"id": 1, "customer_id": None, "status": "a"}),
             ("public.lines", "c", {"id": 7, "order_id": 1, "line_no": 1, "sku": "x"}),
             ("public.lines", "c", {"id": 8, "order_id": 1, "line_no": 2, "sku": "x"})])
    log.txn([("public.lines", "u", {"id": 7, "order_id": 1, "line_no": 1, "sku": "y"}),
             ("public.lines", "u", {"id": 8, "order_id": 1, "line_no": 2, "sku": "y"})])
    return log, [r for rs in log.parts.values() for r in rs]


def test_a_record_that_never_comes_is_waited_for_then_let_through_by_record_time():
    """Compaction removed a record of the transaction before it was read (a later one of its key
    replaces it): the rest is folded once records LATE_MS newer than its END have been read."""
    log, records = _two_line_order()
    last = [r for r in records if r["topic"].endswith("lines") and json.loads(r["value"])["after"]["sku"] == "y"]
    state = gated_state()
    outs, stats, _ = fold_batch(state, [r for r in records if r is not last[0]], {}, MARKERS, {})
    assert [o.doc["lines"] for o in outs] == [[{"line_no": 1, "sku": "x"}, {"line_no": 2, "sku": "x"}]]
    assert stats.held == 1 and stats.holding == {last[1]["topic"]: {str(last[1]["partition"]): last[1]["offset"]}}
    heartbeat = {"key": b'{"id":"x"}', "value": json.dumps({"status": "BEGIN", "id": "x"}).encode(),
                 "topic": TX_TOPIC, "partition": 0, "offset": 99, "timestamp": log.clock + LATE_MS - 1}
    assert fold_batch(state, [heartbeat], {}, MARKERS, {})[0] == []           # not yet
    outs, stats, _ = fold_batch(state, [dict(heartbeat, offset=100, timestamp=log.clock + LATE_MS)], {}, MARKERS, {})
    assert stats.late == 1 and stats.held == 0
    skus = {line["sku"] for line in outs[0].doc["lines"]}
    assert skus == {"x", "y"}     # line 8's update (its record gone) is the later record's to bring


def test_records_of_a_transaction_whose_end_is_never_read_go_through_late():
    log, records = _two_line_order()
    state = gated_state()
    data = [r for r in records if r["topic"] != TX_TOPIC]
    outs, stats, _ = fold_batch(state, data, {}, MARKERS, {})
    assert outs == [] and stats.held == len(data)
    later = {"key": b'{"id":"x"}', "value": b'{"status":"BEGIN","id":"x"}', "topic": TX_TOPIC, "partition": 0,
             "offset": 50, "timestamp": log.clock + LATE_MS}
    outs, stats, _ = fold_batch(state, [later], {}, MARKERS, {})
    assert stats.late == 2 and outs[0].doc["lines"] == [{"line_no": 1, "sku": "y"}, {"line_no": 2, "sku": "y"}]


def test_a_tombstone_waits_with_its_delete():
    log = TxLog()
    log.txn([("public.orders", "c", {"id": 1, "customer_id": None, "status": "a"}),
             ("public.lines", "c", {"id": 7, "order_id": 1, "line_no": 1, "sku": "x"})])
    log.txn([("public.lines", "d", {"id": 7}),
             ("public.orders", "u", {"id": 1, "customer_id": None, "status": "one line less"})])
    records = [r for rs in log.parts.values() for r in rs]
    tombstone = next(r for r in records if r["value"] is None)
    order_update = next(r for r in records if r["topic"].endswith("orders") and r["offset"] == 1)
    state = gated_state()
    outs, stats, _ = fold_batch(state, [r for r in records if r is not order_update], {}, MARKERS, {})
    assert outs[0].doc["lines"] == [{"line_no": 1, "sku": "x"}] and outs[0].doc["status"] == "a"
    assert stats.held == 2    # the line's delete and its tombstone
    outs, _, _ = fold_batch(state, [order_update], {}, MARKERS, {})
    assert outs[0].doc["lines"] == [] and outs[0].doc["status"] == "one line less"
    assert tombstone["value"] is None


def test_transaction_ids_are_read_from_streamed_records_only():
    streamed = (b'{"before":null,"after":{"id":1,"doc":"{\\"transaction\\":{\\"id\\":\\"fake\\"}}"},'
                b'"source":{"version":"3.3.0.Final","snapshot":"false","txId":77,"lsn":123},'
                b'"transaction":{"id":"77:123","total_order":1,"data_collection_order":1},"op":"u","ts_ms":1}')
    assert transaction_of(streamed) == "77"
    assert transaction_of(streamed.replace(b'"snapshot":"false"', b'"snapshot":"true"')) is None
    assert transaction_of(b'{"after":{"id":1},"source":{"snapshot":"false"},"transaction":null,"op":"c"}') is None
    assert transaction_of(None) is None
    end = transaction_end(b'{"status":"END","id":"77:123","event_count":3,"data_collections":['
                          b'{"data_collection":"public.lines","event_count":2},'
                          b'{"data_collection":"public.orders","event_count":1}],"ts_ms":5}')
    assert end.id == "77" and end.counts == {"public.lines": 2, "public.orders": 1} and end.ts_ms == 5
    assert transaction_end(b'{"status":"BEGIN","id":"77:123"}') is None
