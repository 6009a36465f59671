"""The nested-document state model against a model of Postgres: random histories of orders, their
lines (composite key), a shared customer and tags through a link table, delivered in any order per
key with redeliveries; every document equals the one built from the final rows, and every change
names every root whose document it changed."""
from __future__ import annotations

import pickle
import random

from hypothesis import given, settings, strategies as st

from derived.change import Change, Position, Version
from derived.nested import DocumentSpec, NestedState, Relation, Through

SPEC = DocumentSpec("orders", "public.orders", relations=(
    Relation("lines", "public.lines", "one_to_many", (("order_id", "id"),), columns=("line_no", "sku", "note"),
             order_by="line_no", relations=(  # one level deeper: a line's product
                 Relation("product", "public.products", "many_to_one", (("product_id", "id"),), columns=("title",)),)),
    Relation("customer", "public.customers", "many_to_one", (("customer_id", "id"),), columns=("name",)),
    Relation("tags", "public.order_tags", "many_to_many", (("order_id", "id"),), columns=("name",),
             through=Through("public.tags", (("tag_id", "id"),))),
))
KEYS = {"public.orders": ("id",), "public.lines": ("order_id", "line_no"), "public.customers": ("id",),
        "public.order_tags": ("order_id", "tag_id"), "public.tags": ("id",), "public.products": ("id",)}


def brute_force(db: dict[str, dict], order_id: int) -> dict | None:
    """The document from the final rows, by plain joins (what verify's SQL would build)."""
    order = db["public.orders"].get((order_id,))
    if order is None:
        return None
    lines = sorted((r for r in db["public.lines"].values() if r["order_id"] == order_id), key=lambda r: r["line_no"])
    customer = db["public.customers"].get((order["customer_id"],))
    tag_ids = sorted(r["tag_id"] for r in db["public.order_tags"].values() if r["order_id"] == order_id)
    tags = [db["public.tags"][(t,)] for t in tag_ids if (t,) in db["public.tags"]]
    tags.sort(key=lambda r: r["id"])
    def product(r):
        p = db["public.products"].get((r["product_id"],))
        return {"title": p["title"]} if p else None

    return {**order, "lines": [{"line_no": r["line_no"], "sku": r["sku"], "note": r["note"], "product": product(r)}
                               for r in lines],
            "customer": {"name": customer["name"]} if customer else None, "tags": [{"name": t["name"]} for t in tags]}


def history(seed: int, steps: int):
    """(changes in commit order with versions, final rows)."""
    rnd = random.Random(seed)
    db = {t: {} for t in KEYS}
    out: list[Change] = []
    lsn = 1000

    def emit(table, op, row=None, key=None, unavailable=()):
        nonlocal lsn
        lsn += 10
        key = key if key is not None else {c: row[c] for c in KEYS[table]}
        out.append(Change(table, op, key, str(key), row, Version(lsn, 1, lsn), Position("t", 0, len(out)),
                          unavailable=unavailable))

    for _ in range(steps):
        r = rnd.random()
        oid, cid, tid = rnd.randint(1, 4), rnd.randint(1, 3), rnd.randint(1, 3)
        if r < 0.15:
            row = {"id": oid, "customer_id": cid, "note": f"o{lsn}"}
            db["public.orders"][(oid,)] = row
            emit("public.orders", "upsert", dict(row))
        elif r < 0.22 and (oid,) in db["public.orders"]:
            del db["public.orders"][(oid,)]
            emit("public.orders", "delete", key={"id": oid})
        elif r < 0.45:
            ln = rnd.randint(1, 3)
            old = db["public.lines"].get((oid, ln))
            row = {"order_id": oid, "line_no": ln, "sku": f"s{lsn}", "note": "n" * rnd.randint(0, 3),
                   "product_id": rnd.randint(1, 2)}
            if old is not None and rnd.random() < 0.3:  # an unchanged TOAST column: the placeholder's
                row["note"] = old["note"]
                db["public.lines"][(oid, ln)] = row
                emit("public.lines", "upsert", {**row, "note": "__debezium_unavailable_value"}, unavailable=("note",))
            else:
                db["public.lines"][(oid, ln)] = row
                emit("public.lines", "upsert", dict(row))
        elif r < 0.52:
            keys = list(db["public.lines"])
            if keys:  # a primary-key change moves a line to another order: delete + create
                k = rnd.choice(keys)
                row = db["public.lines"].pop(k)
                emit("public.lines", "delete", key={"order_id": k[0], "line_no": k[1]})
                moved = {**row, "order_id": oid}
                if (oid, row["line_no"]) not in db["public.lines"]:
                    db["public.lines"][(oid, row["line_no"])] = moved
                    emit("public.lines", "upsert", dict(moved))
        elif r < 0.62:
            row = {"id": cid, "name": f"c{lsn}"}
            db["public.customers"][(cid,)] = row
            emit("public.customers", "upsert", dict(row))
        elif r < 0.65 and (cid,) in db["public.customers"]:
            del db["public.customers"][(cid,)]
            emit("public.customers", "delete", key={"id": cid})
        elif r < 0.75:
            row = {"order_id": oid, "tag_id": tid}
            db["public.order_tags"][(oid, tid)] = row
            emit("public.order_tags", "upsert", dict(row))
        elif r < 0.80 and (oid, tid) in db["public.order_tags"]:
            del db["public.order_tags"][(oid, tid)]
            emit("public.order_tags", "delete", key={"order_id": oid, "tag_id": tid})
        elif r < 0.90:
            row = {"id": tid, "name": f"t{lsn}"}
            db["public.tags"][(tid,)] = row
            emit("public.tags", "upsert", dict(row))
        elif r < 0.915:
            row = {"id": rnd.randint(1, 2), "title": f"p{lsn}"}
            db["public.products"][(row["id"],)] = row
            emit("public.products", "upsert", dict(row))
        elif r < 0.93:
            db["public.lines"].clear()
            emit("public.lines", "truncate", key={})
        elif r < 0.96:  # an order that points at another customer
            if (oid,) in db["public.orders"]:
                row = {**db["public.orders"][(oid,)], "customer_id": cid}
                db["public.orders"][(oid,)] = row
                emit("public.orders", "upsert", dict(row))
    return out, db


def delivered(changes: list[Change], rnd: random.Random) -> list[Change]:
    """Per key in order (one partition per key), keys interleaved at random, truncates anywhere
    after what preceded them in their own table's marker partition, and a redelivered suffix."""
    queues: dict[tuple, list[Change]] = {}
    for c in changes:
        queues.setdefault((c.table, c.doc_id, c.op == "truncate"), []).append(c)
    out: list[Change] = []
    while queues:
        k = rnd.choice(list(queues))
        out.append(queues[k].pop(0))
        if not queues[k]:
            del queues[k]
    return out + out[len(out) - rnd.randint(0, min(10, len(out))):]


def all_docs(state: NestedState) -> dict:
    return {o: state.document((o,))[0] for o in range(1, 5)}


def folded(spec: DocumentSpec, seed: int, steps: int, order_seed: int) -> tuple[NestedState, dict]:
    """(the state after a random history delivered in any order, the final rows); every change
    named every root whose document it changed."""
    changes, db = history(seed, steps)
    state = NestedState(spec, KEYS)
    for change in delivered(changes, random.Random(order_seed)):
        before = all_docs(state)
        roots = state.apply(change)
        changed = {(o,) for o, d in all_docs(state).items() if before[o] != d}
        assert changed <= roots, (change, changed - roots)
    return state, db


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 60), st.integers(0, 1000))
def test_documents_equal_the_final_rows_and_changes_name_every_root_they_change(seed, steps, order_seed):
    changes, db = history(seed, steps)
    state = NestedState(SPEC, KEYS)
    versions: dict[int, Version] = {}
    for change in delivered(changes, random.Random(order_seed)):
        before = all_docs(state)
        roots = state.apply(change)
        after = all_docs(state)
        changed = {(o,) for o in before if before[o] != after[o]}
        assert changed <= roots, (change, changed - roots)
        for (o,) in roots:  # what the stores would be sent: a version never lower than before
            _, v = state.document((o,))
            assert v >= versions.get(o, Version(0, 0, 0))
            versions[o] = v
    # Truncates apply to rows written before them; a row written after a truncate survives it.
    for o in range(1, 5):
        assert state.document((o,))[0] == brute_force(db, o), (o, seed, steps, order_seed)


def test_a_child_before_its_root_is_held_and_counts_in_the_version():
    state = NestedState(SPEC, KEYS)
    line = Change("public.lines", "upsert", {"order_id": 1, "line_no": 1}, "l", {"order_id": 1, "line_no": 1,
                  "sku": "a", "note": ""}, Version(50, 1, 50), Position("t", 0, 0))
    assert state.apply(line) == set()
    assert state.document((1,)) == (None, Version(0, 0, 0))
    order = Change("public.orders", "upsert", {"id": 1}, "o", {"id": 1, "customer_id": 9, "note": "x"},
                   Version(40, 1, 40), Position("t", 0, 1))
    assert state.apply(order) == {(1,)}
    doc, version = state.document((1,))
    assert doc["lines"] == [{"line_no": 1, "sku": "a", "note": "", "product": None}] and doc["customer"] is None
    assert version == Version(50, 1, 50)  # the highest among its parts


def test_a_customer_rename_reaches_every_order_of_that_customer():
    state = NestedState(SPEC, KEYS)
    for i in range(1, 4):
        state.apply(Change("public.orders", "upsert", {"id": i}, str(i), {"id": i, "customer_id": 7 if i < 3 else 8,
                                                                         "note": ""}, Version(i, 1, i),
                           Position("t", 0, i)))
    rename = Change("public.customers", "upsert", {"id": 7}, "7", {"id": 7, "name": "Ada"}, Version(10, 1, 10),
                    Position("t", 0, 9))
    assert state.apply(rename) == {(1,), (2,)}
    assert state.document((1,))[0]["customer"] == {"name": "Ada"} and state.document((3,))[0]["customer"] is None


def test_a_table_named_twice_and_rows_pointing_at_each_other_end():
    """An employee document with the manager (the same table): a row managing itself, two rows
    managing each other."""
    spec = DocumentSpec("emp", "public.emp", None, (
        Relation("manager", "public.emp", "many_to_one", (("manager_id", "id"),), ("name",)),))
    state = NestedState(spec, {"public.emp": ("id",)})

    def put(i, manager, name, lsn):
        return state.apply(Change("public.emp", "upsert", {"id": i}, str(i), {"id": i, "manager_id": manager,
                                  "name": name}, Version(lsn, 1, lsn), Position("t", 0, lsn)))

    assert put(1, 1, "self", 10) == {(1,)}
    assert put(2, 3, "a", 11) == {(2,)}
    assert put(3, 2, "b", 12) == {(2,), (3,)}
    assert put(3, 2, "b2", 13) == {(2,), (3,)}        # 3 is 2's manager: both documents change
    assert state.document((2,))[0]["manager"] == {"name": "b2"}
    assert state.document((1,))[0]["manager"] == {"name": "self"}


# pgsync's shapes: a relation of one column's values (`value`), and null for a list without rows.
SCALAR_SPEC = DocumentSpec("orders", "public.orders", relations=(
    Relation("lines", "public.lines", "one_to_many", (("order_id", "id"),), order_by="line_no", value="sku",
             empty_null=True),
    Relation("customer", "public.customers", "many_to_one", (("customer_id", "id"),), value="name"),
    Relation("tags", "public.order_tags", "many_to_many", (("order_id", "id"),), value="name", empty_null=True,
             through=Through("public.tags", (("tag_id", "id"),))),
))


def scalar_brute_force(db: dict[str, dict], order_id: int) -> dict | None:
    doc = brute_force(db, order_id)
    if doc is None:
        return None
    return {**doc, "lines": [line["sku"] for line in doc["lines"]] or None,
            "customer": doc["customer"]["name"] if doc["customer"] else None,
            "tags": [t["name"] for t in doc["tags"]] or None}


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 60), st.integers(0, 1000))
def test_scalar_relations_and_null_for_empty_lists_equal_the_final_rows(seed, steps, order_seed):
    state, db = folded(SCALAR_SPEC, seed, steps, order_seed)
    for o in range(1, 5):
        assert state.document((o,))[0] == scalar_brute_force(db, o), (o, seed, steps, order_seed)


def test_rendering_choices_are_not_in_the_states_fingerprint():
    """`value` and `empty_null` change how a document is shown, not the rows a state holds."""
    plain = Relation("tags", "public.order_tags", "many_to_many", (("order_id", "id"),))
    assert repr(plain) == repr(Relation("tags", "public.order_tags", "many_to_many", (("order_id", "id"),),
                                        value="name", empty_null=True))


def test_renamed_columns_show_under_their_new_names_at_every_level():
    spec = DocumentSpec("orders", "public.orders", columns=("id", "note"), rename=(("note", "remark"),), relations=(
        Relation("customer", "public.customers", "many_to_one", (("customer_id", "id"),), columns=("name",),
                 rename=(("name", "customer_name"),)),))
    state = NestedState(spec, KEYS)
    state.apply(Change("public.customers", "upsert", {"id": 9}, "c", {"id": 9, "name": "Ann"}, Version(10, 1, 10),
                       Position("t", 0, 0)))
    state.apply(Change("public.orders", "upsert", {"id": 1}, "o", {"id": 1, "customer_id": 9, "note": "x"},
                       Version(20, 1, 20), Position("t", 0, 1)))
    assert state.document((1,))[0] == {"id": 1, "remark": "x", "customer": {"customer_name": "Ann"}}


def meta_brute_force(db: dict[str, dict], order_id: int) -> dict | None:
    """`_meta` from the final rows: every row the document shows, per bare table name."""
    order = db["public.orders"].get((order_id,))
    if order is None:
        return None
    lines = [r for r in db["public.lines"].values() if r["order_id"] == order_id]
    products = {r["product_id"] for r in lines if (r["product_id"],) in db["public.products"]}
    links = [r for r in db["public.order_tags"].values()   # a link to no tag shows nothing
             if r["order_id"] == order_id and (r["tag_id"],) in db["public.tags"]]
    tags = {r["tag_id"] for r in links if (r["tag_id"],) in db["public.tags"]}
    seen = {"orders": {"id": [order_id]}}
    if lines:
        seen["lines"] = {"order_id": [order_id], "line_no": sorted({r["line_no"] for r in lines})}
    if products:
        seen["products"] = {"id": sorted(products)}
    if (order["customer_id"],) in db["public.customers"]:
        seen["customers"] = {"id": [order["customer_id"]]}
    if links:
        seen["order_tags"] = {"order_id": [order_id], "tag_id": sorted({r["tag_id"] for r in links})}
    if tags:
        seen["tags"] = {"id": sorted(tags)}
    return seen


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 60), st.integers(0, 1000))
def test_meta_names_the_keys_of_every_row_a_document_is_built_from(seed, steps, order_seed):
    from dataclasses import replace

    state, db = folded(replace(SPEC, meta=True), seed, steps, order_seed)
    for o in range(1, 5):
        doc = state.document((o,))[0]
        want = brute_force(db, o)
        assert (doc and {k: v for k, v in doc.items() if k != "_meta"}) == want
        assert (doc or {}).get("_meta") == meta_brute_force(db, o), (o, seed, steps, order_seed)


def test_the_state_holds_only_the_columns_a_document_shows_sorts_joins_or_keys_by():
    state = NestedState(SPEC, dict(KEYS))
    v = Version(10, 1, 10)

    def put(table, row):
        key = {c: row[c] for c in KEYS[table]}
        state.apply(Change(table, "upsert", key, str(key), row, v, Position("t", 0, 0)))

    put("public.orders", {"id": 1, "customer_id": 7, "status": "open", "audit": "x" * 100})
    put("public.lines", {"order_id": 1, "line_no": 1, "sku": "a", "note": None, "product_id": 3, "audit": "y" * 100})
    put("public.customers", {"id": 7, "name": "ann", "email": "a@x", "audit": "z"})
    put("public.order_tags", {"order_id": 1, "tag_id": 5, "added_by": "bob"})
    put("public.tags", {"id": 5, "name": "red", "color": "#f00"})
    put("public.products", {"id": 3, "title": "pen", "price": 2})

    held = {t: next(iter(rows.values())).values for t, rows in state.rows.items()}
    assert set(held["public.orders"]) == {"id", "customer_id", "status", "audit"}    # columns: all
    assert set(held["public.lines"]) == {"order_id", "line_no", "sku", "note", "product_id"}
    assert set(held["public.customers"]) == {"id", "name"}
    assert set(held["public.order_tags"]) == {"order_id", "tag_id"}                  # link rows: key and joins
    assert set(held["public.tags"]) == {"id", "name"}
    assert set(held["public.products"]) == {"id", "title"}
    doc, _ = state.document((1,))
    assert doc == {"id": 1, "customer_id": 7, "status": "open", "audit": "x" * 100,
                   "lines": [{"line_no": 1, "sku": "a", "note": None, "product": {"title": "pen"}}],
                   "customer": {"name": "ann"}, "tags": [{"name": "red"}]}


def test_a_relation_shown_as_one_columns_values_keeps_every_column():
    """`value` is not in the state's fingerprint: the column it names can change without a rebuild."""
    spec = DocumentSpec("orders", "public.orders", relations=(
        Relation("tags", "public.order_tags", "many_to_many", (("order_id", "id"),), columns=("name",),
                 through=Through("public.tags", (("tag_id", "id"),)), value="name"),))
    state = NestedState(spec, {t: KEYS[t] for t in spec.tables()})
    v = Version(10, 1, 10)
    state.apply(Change("public.tags", "upsert", {"id": 5}, "5", {"id": 5, "name": "red", "color": "#f00"}, v,
                       Position("t", 0, 0)))
    assert set(state.rows["public.tags"][(5,)].values) == {"id", "name", "color"}


def test_the_columns_kept_are_worked_out_by_the_code_that_loads_a_state_not_pickled_with_it(monkeypatch):
    import pickle

    from derived import nested

    state = NestedState(SPEC, dict(KEYS))
    row = {"id": 7, "name": "ann", "email": "a@x"}
    state.apply(Change("public.customers", "upsert", {"id": 7}, "7", row, Version(10, 1, 10), Position("t", 0, 0)))
    assert "email" not in state.rows["public.customers"][(7,)].values
    wider = nested.held_columns

    def with_email(*args, **kwargs):
        out = dict(wider(*args, **kwargs))
        out["public.customers"] = out["public.customers"] | {"email"}
        return out

    monkeypatch.setattr(nested, "held_columns", with_email)   # a later version that needs another column
    loaded = pickle.loads(pickle.dumps(state))
    loaded.apply(Change("public.customers", "upsert", {"id": 7}, "7", row, Version(20, 1, 20), Position("t", 0, 1)))
    assert loaded.rows["public.customers"][(7,)].values["email"] == "a@x"


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 60), st.integers(0, 1000))
def test_a_state_pickled_between_changes_goes_on_as_if_it_never_was(seed, steps, order_seed):
    """The documents' query pickles the state after every batch: a state reloaded mid-history folds
    the rest into the same documents at the same versions, indexes and prune included."""
    import pickle

    changes, _ = history(seed, steps)
    order = delivered(changes, random.Random(order_seed))
    kept, reloaded = NestedState(SPEC, dict(KEYS)), NestedState(SPEC, dict(KEYS))
    for n, change in enumerate(order):
        if n % 7 == 3:
            kept.prune()
            reloaded = pickle.loads(pickle.dumps(reloaded, protocol=pickle.HIGHEST_PROTOCOL))
            reloaded.prune()
        assert kept.apply(change) == reloaded.apply(change)
        assert [kept.document((o,)) for o in range(1, 5)] == [reloaded.document((o,)) for o in range(1, 5)]
    assert (kept.rows, kept.touched, kept.cuts, kept._index) == (reloaded.rows, reloaded.touched, reloaded.cuts,
                                                                 reloaded._index)


def test_a_state_pickled_before_rows_were_saved_as_tuples_still_loads():
    import pickle

    state = NestedState(SPEC, dict(KEYS))
    state.apply(Change("public.orders", "upsert", {"id": 1}, "1", {"id": 1, "customer_id": 7, "status": "new"},
                       Version(10, 1, 10), Position("t", 0, 0)))
    state.document((1,))
    old = {k: v for k, v in state.__dict__.items() if k != "_kept"}   # 0.1's __getstate__
    loaded = NestedState.__new__(NestedState)
    loaded.__setstate__(pickle.loads(pickle.dumps(old)))
    assert loaded.rows == state.rows and loaded.touched == state.touched
    assert loaded.document((1,)) == state.document((1,))
    again = pickle.loads(pickle.dumps(loaded))
    assert again.rows == state.rows and isinstance(next(iter(again.touched.values())), Version)


def test_a_relations_join_sides_are_worked_out_once_and_leave_its_identity_alone():
    rel = Relation("lines", "order_lines", "one_to_many", (("order_id", "id"), ("region", "region")))
    before = repr(rel)
    assert rel.sides == (("order_id", "region"), ("id", "region"))
    assert rel.sides is rel.sides                       # kept, not rebuilt per row
    assert repr(rel) == before                          # the repr names a checkpoint's state: unchanged
    fresh = Relation("lines", "order_lines", "one_to_many", (("order_id", "id"), ("region", "region")))
    assert rel == fresh and hash(rel) == hash(fresh)    # equality is the fields', worked out or not
    again = pickle.loads(pickle.dumps(rel))
    assert again == rel and again.sides == rel.sides


def _state_of(state: NestedState) -> tuple:
    """What a state holds; its indexes without the empty sets a key's departure leaves behind."""
    index = {k: {v: keys for v, keys in idx.items() if keys} for k, idx in state._index.items()}
    return state.rows, state.touched, state.cuts, index


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 60), st.integers(0, 1000), st.integers(1, 9), st.integers(1, 4))
def test_a_state_saved_as_a_base_and_its_deltas_is_the_state(seed, steps, order_seed, batch, rebase_every):
    """The documents' query saves a base now and then and, after the other batches, only what the
    batch changed (take_changes): the base with every later delta applied is the state, and folds the
    rest of the history into the same documents at the same versions."""
    import pickle

    changes, _ = history(seed, steps)
    order = delivered(changes, random.Random(order_seed))
    live = NestedState(SPEC, dict(KEYS))
    base, deltas = pickle.dumps(live), []
    for n, change in enumerate(order):
        if n % batch == 0:   # a batch ends, the next begins (the fold prunes first)
            deltas.append(pickle.dumps(live.take_changes()))
            if len(deltas) % rebase_every == 0:
                base, deltas = pickle.dumps(live), []
            replica = pickle.loads(base)
            for d in deltas:
                replica.apply_changes(pickle.loads(d))
            assert _state_of(replica) == _state_of(live)
            if n % 2:
                live = replica   # the batch folded by a worker that rebuilt the state, or by one that kept it
            live.prune()
        live.apply(change)
        for o in range(1, 5):   # a document read raises the version its root was handed out at
            live.document((o,))
    deltas.append(pickle.dumps(live.take_changes()))
    replica = pickle.loads(base)
    for d in deltas:
        replica.apply_changes(pickle.loads(d))
    assert _state_of(replica) == _state_of(live)
    assert [replica.document((o,)) for o in range(1, 5)] == [live.document((o,)) for o in range(1, 5)]
