"""Model-based property test of the nested-document path without Spark: random transactional
histories over orders, lines, customers and an order-tags link table (moves, children before their
root, a root deleted and re-inserted, customer renames fanning out, truncates), as Debezium records
with tombstones in three partitions per topic, delivered interleaved across partitions, split into
batches, with batches crashed half-written and re-run from the state before them (the state store's
contract), into a store with the cache's version rule. The store ends equal to the documents joined
from the final rows, and every document's version only goes up."""
from __future__ import annotations

import json
import pickle
import random
import zlib
from typing import Any

from hypothesis import given, settings, strategies as st

from derived.nested import DocumentSpec, NestedState, Relation, Through
from pipelines.documents.nested_fold import FoldState, fold_batch

P = "cdc"
MARKERS = "public.marks"
KEYS = {"public.orders": ("id",), "public.lines": ("id",), "public.customers": ("id",),
        "public.order_tags": ("order_id", "tag_id"), "public.tags": ("id",)}
SPEC = DocumentSpec("orders", "public.orders", None, (
    Relation("lines", "public.lines", "one_to_many", (("order_id", "id"),), ("line_no", "sku"), "line_no"),
    Relation("customer", "public.customers", "many_to_one", (("customer_id", "id"),), ("name",)),
    Relation("tags", "public.order_tags", "many_to_many", (("order_id", "id"),), ("name",), None,
             Through("public.tags", (("tag_id", "id"),))),
))
PARTITIONS = 3


def joined(db: dict[str, dict[tuple, dict]]) -> dict[str, dict]:
    """The documents of the final rows, by plain joins (NULL joins nothing)."""
    out = {}
    for (oid,), o in db["public.orders"].items():
        lines = sorted((r for r in db["public.lines"].values() if r["order_id"] == oid),
                       key=lambda r: (r["line_no"], r["id"]))
        cust = db["public.customers"].get((o["customer_id"],)) if o["customer_id"] is not None else None
        tags = sorted((db["public.tags"][(lk["tag_id"],)] for lk in db["public.order_tags"].values()
                       if lk["order_id"] == oid and (lk["tag_id"],) in db["public.tags"]), key=lambda t: t["id"])
        out[str(oid)] = {**o, "lines": [{"line_no": r["line_no"], "sku": r["sku"]} for r in lines],
                         "customer": {"name": cust["name"]} if cust else None,
                         "tags": [{"name": t["name"]} for t in tags]}
    return out


class Log:
    """Topics of Debezium records, keyed and partitioned as Debezium does."""

    def __init__(self):
        self.parts: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self.commit = 100

    def _append(self, topic: str, key: dict, value: bytes | None) -> None:
        part = zlib.crc32(json.dumps(key, sort_keys=True).encode()) % PARTITIONS
        records = self.parts.setdefault((topic, part), [])
        records.append({"key": json.dumps(key).encode(), "value": value, "topic": topic, "partition": part,
                        "offset": len(records)})

    def txn(self, changes: list[tuple[str, str, dict]]) -> None:
        prev = self.commit
        lsn = prev
        for table, op, row in changes:
            lsn += 10
            schema, name = table.split(".")
            key = {c: row[c] for c in KEYS.get(table, ("table_name",))}
            after = None if op == "d" else row
            env = {"op": op, "after": after, "before": key if op == "d" else None, "ts_ms": 1,
                   "source": {"schema": schema, "table": name, "lsn": lsn, "snapshot": "false", "ts_ms": 1,
                              "sequence": json.dumps([str(prev), str(lsn)])}}
            self._append(f"{P}.{table}", key, json.dumps(env).encode())
            if op == "d":
                self._append(f"{P}.{table}", key, None)  # the tombstone after every delete
        self.commit = lsn + 5

    def truncate(self, table: str) -> None:
        prev, lsn = self.commit, self.commit + 10
        schema, name = MARKERS.split(".")
        row = {"table_name": table, "truncated_at": "2026-11-23T10:00:00Z"}
        env = {"op": "u", "after": row, "before": None, "ts_ms": 1,
               "source": {"schema": schema, "table": name, "lsn": lsn, "snapshot": "false", "ts_ms": 1,
                          "sequence": json.dumps([str(prev), str(lsn)])}}
        self._append(f"{P}.{MARKERS}", {"table_name": table}, json.dumps(env).encode())
        self.commit = lsn + 5


def history(rnd: random.Random, steps: int, log: Log | None = None, db: dict[str, dict[tuple, dict]] | None = None
            ) -> tuple[Log, dict[str, dict[tuple, dict]]]:
    """`steps` more transactions, appended to `log` (changing `db`) when given."""
    db = db if db is not None else {t: {} for t in KEYS}
    log = log if log is not None else Log()
    next_line = [1 + max((k[0] for k in db["public.lines"]), default=0) + len(log.parts) * 1000]

    def put(table: str, row: dict) -> tuple[str, str, dict]:
        key = tuple(row[c] for c in KEYS[table])
        op = "u" if key in db[table] else "c"
        db[table][key] = dict(row)
        return table, op, dict(row)

    def delete(table: str, key: tuple) -> tuple[str, str, dict] | None:
        row = db[table].pop(key, None)
        return None if row is None else (table, "d", {c: row[c] for c in KEYS[table]})

    for _ in range(steps):
        kind = rnd.random()
        oid, cid = rnd.randint(1, 6), rnd.randint(1, 3)
        batch: list = []
        if kind < 0.2:
            batch.append(put("public.orders", {"id": oid, "customer_id": rnd.choice([cid, None]),
                                               "status": rnd.choice("abc")}))
        elif kind < 0.3:  # a root deleted (its lines stay, as without a foreign key), maybe back at once
            batch.append(delete("public.orders", (oid,)))
            if rnd.random() < 0.5:
                batch.append(put("public.orders", {"id": oid, "customer_id": cid, "status": "back"}))
        elif kind < 0.5:  # a new line, maybe of an order that does not exist yet
            batch.append(put("public.lines", {"id": next_line[0], "order_id": rnd.randint(1, 8),
                                              "line_no": rnd.randint(1, 3), "sku": f"s{rnd.randint(1, 9)}"}))
            next_line[0] += 1
        elif kind < 0.62 and db["public.lines"]:  # a line moves, or changes
            (lid,) = rnd.choice(sorted(db["public.lines"]))
            row = dict(db["public.lines"][(lid,)])
            if rnd.random() < 0.5:
                row["order_id"] = rnd.randint(1, 8)
            else:
                row["sku"] = f"m{rnd.randint(1, 9)}"
            batch.append(put("public.lines", row))
        elif kind < 0.7 and db["public.lines"]:
            batch.append(delete("public.lines", rnd.choice(sorted(db["public.lines"]))))
        elif kind < 0.8:  # a customer rename: every order of theirs
            batch.append(put("public.customers", {"id": cid, "name": f"c{cid}-{rnd.randint(1, 99)}"}))
        elif kind < 0.88:
            tid = rnd.randint(1, 3)
            batch.append(put("public.tags", {"id": tid, "name": f"t{tid}-{rnd.randint(1, 9)}"}))
            batch.append(put("public.order_tags", {"order_id": oid, "tag_id": tid}))
        elif kind < 0.93 and db["public.order_tags"]:
            batch.append(delete("public.order_tags", rnd.choice(sorted(db["public.order_tags"]))))
        elif kind < 0.97:
            log.truncate(table := rnd.choice(["public.lines", "public.order_tags", "public.customers"]))
            db[table].clear()
            continue
        batch = [b for b in batch if b is not None]
        if batch:
            log.txn(batch)
    return log, db


def deliveries(log: "Log | Stretch", rnd: random.Random) -> list[list[dict[str, Any]]]:
    """Every record once, in offset order per partition, partitions interleaved at random, cut into batches."""
    cursors = {tp: 0 for tp in log.parts}
    batches: list[list[dict[str, Any]]] = []
    while any(cursors[tp] < len(log.parts[tp]) for tp in cursors):
        batch = []
        for tp, records in log.parts.items():
            take = rnd.randint(0, 4)
            batch.extend(records[cursors[tp]:cursors[tp] + take])
            cursors[tp] = min(len(records), cursors[tp] + take)
        rnd.shuffle(batch)  # the fold orders a partition's records itself
        batches.append(batch)
    return batches


def run_pipeline(log: Log, rnd: random.Random) -> tuple[dict[str, Any], list[str]]:
    state = FoldState(NestedState(SPEC, dict(KEYS)))
    store: dict[str, tuple[Any, Any]] = {}   # doc id -> (version, document or None)
    problems: list[str] = []
    for batch in deliveries(log, rnd):
        saved = pickle.dumps(state)
        attempts = 2 if rnd.random() < 0.2 else 1   # a crash after some writes: re-run from the saved state
        for attempt in range(attempts):
            if attempt:
                state = pickle.loads(saved)
            outs, _, dead = fold_batch(state, batch, {}, MARKERS, {})
            assert not dead
            written = outs if attempt == attempts - 1 else outs[:len(outs) // 2]
            for o in written:
                held = store.get(o.doc_id)
                if held is not None and held[0] > o.version:
                    # A new document must never be refused: its state is newer than what is held.
                    if held[1] != o.doc:
                        problems.append(f"{o.doc_id}: {o.version} below held {held[0]}")
                    continue
                store[o.doc_id] = (o.version, o.doc)
    return {k: doc for k, (_, doc) in store.items() if doc is not None}, problems


@settings(max_examples=120, deadline=None)
@given(st.integers(0, 10_000), st.integers(5, 70))
def test_documents_end_equal_to_the_joined_final_rows(seed: int, steps: int):
    rnd = random.Random(seed)
    log, db = history(rnd, steps)
    got, problems = run_pipeline(log, rnd)
    assert not problems
    assert got == joined(db)


def test_a_tombstone_alone_deletes_the_held_row():
    """Compaction removed a delete record before it was read: its tombstone still deletes the row."""
    log = Log()
    log.txn([("public.orders", "c", {"id": 1, "customer_id": None, "status": "a"}),
             ("public.lines", "c", {"id": 7, "order_id": 1, "line_no": 1, "sku": "x"})])
    state = FoldState(NestedState(SPEC, dict(KEYS)))
    records = [r for rs in log.parts.values() for r in rs]
    outs, _, _ = fold_batch(state, records, {}, MARKERS, {})
    assert outs[0].doc["lines"] == [{"line_no": 1, "sku": "x"}]
    tomb = {"key": json.dumps({"id": 7}).encode(), "value": None, "topic": f"{P}.public.lines", "partition": 0,
            "offset": 99}
    outs, _, _ = fold_batch(state, [tomb], {}, MARKERS, {})
    assert outs[0].doc["lines"] == []
    assert fold_batch(state, [tomb], {}, MARKERS, {})[0] == []   # again: nothing held, nothing touched


def test_values_and_keys_are_typed_before_they_join():
    """A date key joins a date column: both sides in the typed rendering (epoch days -> ISO)."""
    log = Log()
    log.txn([("public.orders", "c", {"id": 1, "customer_id": 19723, "status": "a"}),
             ("public.customers", "c", {"id": 19723, "name": "typed"})])
    from connectors.typed_values import row_converter

    typed = {"public.customers": row_converter({"id": "date", "name": "text"}),
             "public.orders": row_converter({"id": "integer", "customer_id": "date", "status": "text"})}
    state = FoldState(NestedState(SPEC, dict(KEYS)))
    outs, _, _ = fold_batch(state, [r for rs in log.parts.values() for r in rs], {}, MARKERS, typed)
    (doc,) = [o.doc for o in outs]
    assert doc["customer_id"] == "2024-01-01" and doc["customer"] == {"name": "typed"}


def test_unchanged_toast_of_a_row_not_held_is_read_again():
    """A line's first record is an update with its note unchanged (its create compacted away):
    the note comes from Postgres; a held row's placeholder keeps the held value instead."""
    spec = DocumentSpec("orders", "public.orders", None, (
        Relation("lines", "public.lines", "one_to_many", (("order_id", "id"),), ("note",)),))
    keys = {"public.orders": ("id",), "public.lines": ("id",)}
    log = Log()
    log.txn([("public.orders", "c", {"id": 1, "customer_id": None, "status": "a"}),
             ("public.lines", "u", {"id": 7, "order_id": 1, "note": "__debezium_unavailable_value"})])
    asked = []

    def reread(changes):
        asked.extend(c.key["id"] for c in changes)
        for c in changes:
            c.row = {**c.row, "note": "from postgres"}
            c.unavailable = ()
        return len(changes)

    state = FoldState(NestedState(spec, keys))
    records = [r for rs in log.parts.values() for r in rs]
    (out,) = fold_batch(state, records, {}, MARKERS, {}, reread)[0]
    assert out.doc["lines"] == [{"note": "from postgres"}] and asked == [7]
    log2 = Log()
    log2.commit = log.commit
    log2.txn([("public.lines", "u", {"id": 7, "order_id": 1, "note": "__debezium_unavailable_value"})])
    records = [dict(r, offset=r["offset"] + 10) for rs in log2.parts.values() for r in rs]
    (out,) = fold_batch(state, records, {}, MARKERS, {}, reread)[0]
    assert out.doc["lines"] == [{"note": "from postgres"}] and asked == [7]   # held: not asked again


class Stretch:
    """Records of a log between two positions (per partition), or all of them compacted (the
    cleaner's result: a key's last record, a tombstone included)."""

    def __init__(self, parts: dict[tuple[str, int], list[dict[str, Any]]]):
        self.parts = parts

    @classmethod
    def between(cls, log: Log, start: dict, end: dict) -> "Stretch":
        return cls({tp: rs[start.get(tp, 0):end.get(tp, len(rs))] for tp, rs in log.parts.items()})

    @classmethod
    def compacted(cls, log: Log, end: dict) -> "Stretch":
        parts = {}
        for tp, rs in log.parts.items():
            last = {r["key"]: r for r in rs[:end.get(tp, len(rs))]}
            parts[tp] = sorted(last.values(), key=lambda r: r["offset"])
        return cls(parts)


def ends(log: Log) -> dict[tuple[str, int], int]:
    return {tp: len(rs) for tp, rs in log.parts.items()}


def write(store: dict[str, tuple[Any, Any]], outs) -> None:
    """The stores' rule for documents: an equal or higher version replaces."""
    for o in outs:
        held = store.get(o.doc_id)
        if held is None or o.version >= held[0]:
            store[o.doc_id] = (o.version, o.doc)


def fold(state: FoldState, stretch: Stretch, rnd: random.Random, store: dict, crashes: bool = False) -> FoldState:
    """The stretch folded in batches into `store`; with `crashes`, some batches die half-written and
    run again from the state before them (the state store's contract). Returns the state."""
    for batch in deliveries(stretch, rnd):
        saved = pickle.dumps(state)
        if crashes and rnd.random() < 0.2:
            outs = fold_batch(state, batch, {}, MARKERS, {})[0]
            write(store, outs[:len(outs) // 2])
            state = pickle.loads(saved)
        outs, _, dead = fold_batch(state, batch, {}, MARKERS, {})
        assert not dead
        write(store, outs)
    return state


def visible(store: dict[str, tuple[Any, Any]]) -> dict[str, Any]:
    return {k: doc for k, (_, doc) in store.items() if doc is not None}


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 10_000))
def test_a_rebuilds_state_takes_over_without_gap_or_resurrection(seed: int):
    """The rebuild's hand-over (pipelines/state/documents_state.py, rebuild/phases._DocumentsReplay): the old
    state writes the live store; the rebuild's own state replays the compacted log into a fresh
    store, while the log and the live query go on; under the lock the old state stops wherever it
    is and the rebuild's state writes the rest of the log into the fresh store, which is switched
    in equal to the final joins; then that state goes on as the live one. Batches crash throughout."""
    rnd = random.Random(seed)
    log, db = history(rnd, rnd.randint(5, 40))
    live: dict[str, tuple[Any, Any]] = {}
    old = fold(FoldState(NestedState(SPEC, dict(KEYS))), Stretch.between(log, {}, ends(log)), rnd, live, True)
    a = ends(log)
    history(rnd, rnd.randint(0, 20), log, db)
    replayed = ends(log)
    fresh: dict[str, tuple[Any, Any]] = {}
    new = fold(FoldState(NestedState(SPEC, dict(KEYS))), Stretch.compacted(log, replayed), rnd, fresh, True)
    history(rnd, rnd.randint(0, 20), log, db)
    reach = {tp: rnd.randint(a.get(tp, 0), n) for tp, n in ends(log).items()}
    fold(old, Stretch.between(log, a, reach), rnd, live, True)       # the live query, stopped anywhere
    end = ends(log)
    new = fold(new, Stretch.between(log, replayed, end), rnd, fresh, True)   # under the lock
    assert visible(fresh) == joined(db)                              # what readers get at the switch
    history(rnd, rnd.randint(0, 20), log, db)
    fold(new, Stretch.between(log, end, ends(log)), rnd, fresh, True)
    assert visible(fresh) == joined(db)


def test_two_states_writing_one_store_can_bring_a_deleted_document_back():
    """Why the hand-over never lets two states write one store: the old state read the lines'
    partition further than the orders' and handed order 2 out with a line written after the order
    was deleted; a state that read the delete in one batch and the line in the next deletes it at
    the delete's own version, which the store refuses (it holds the line's, higher)."""
    log = Log()
    log.txn([("public.orders", "c", {"id": 2, "customer_id": None, "status": "a"})])
    log.txn([("public.orders", "d", {"id": 2})])
    log.txn([("public.lines", "c", {"id": 9, "order_id": 2, "line_no": 1, "sku": "late"})])
    orders = [r for (t, _), rs in log.parts.items() if t.endswith("orders") for r in rs]
    lines = [r for (t, _), rs in log.parts.items() if t.endswith("lines") for r in rs]
    store: dict[str, tuple[Any, Any]] = {}
    old = FoldState(NestedState(SPEC, dict(KEYS)))
    write(store, fold_batch(old, orders[:1], {}, MARKERS, {})[0])
    write(store, fold_batch(old, lines, {}, MARKERS, {})[0])      # the line before the delete is read
    other = FoldState(NestedState(SPEC, dict(KEYS)))
    write(store, fold_batch(other, orders, {}, MARKERS, {})[0])      # its batch with the delete first
    write(store, fold_batch(other, lines, {}, MARKERS, {})[0])       # then the line, of no order: nothing
    assert visible(store)["2"]["lines"] == [{"line_no": 1, "sku": "late"}]   # deleted in Postgres, back here
    write(store, fold_batch(old, orders[1:], {}, MARKERS, {})[0])   # the old state alone: its delete wins
    assert "2" not in visible(store)


def test_the_state_holds_the_live_rows_not_the_history():
    """Issue #38.8: rows deleted in one batch are forgotten before the next (that batch's documents
    are in the stores by then), so churn does not grow the state; the documents stay exact."""
    log = Log()
    for i in range(200):    # each order lives one transaction with two lines, then goes with them
        log.txn([("public.orders", "c", {"id": i, "customer_id": None, "status": "a"}),
                 ("public.lines", "c", {"id": 2 * i, "order_id": i, "line_no": 1, "sku": "x"}),
                 ("public.lines", "c", {"id": 2 * i + 1, "order_id": i, "line_no": 2, "sku": "y"})])
        log.txn([("public.lines", "d", {"id": 2 * i}), ("public.lines", "d", {"id": 2 * i + 1}),
                 ("public.orders", "d", {"id": i})])
    log.txn([("public.orders", "c", {"id": 1000, "customer_id": None, "status": "kept"})])
    state, store = FoldState(NestedState(SPEC, dict(KEYS))), {}
    sizes = []
    for batch in deliveries(log, random.Random(3)):
        write(store, fold_batch(state, batch, {}, MARKERS, {})[0])
        sizes.append(sum(len(rows) for rows in state.model.rows.values()) + len(state.model.touched))
    assert visible(store) == {"1000": {"id": 1000, "customer_id": None, "status": "kept", "lines": [],
                                       "customer": None, "tags": []}}
    fold_batch(state, [], {}, MARKERS, {})
    assert sum(len(rows) for rows in state.model.rows.values()) == 1
    assert max(sizes) < 60      # without pruning: 600 rows and 200 roots' versions by the end
