"""The documents' state saved as a base and deltas, kept by the worker that saved it
(pipelines/documents/saved_state.py), against the model of test_nested_fold: random histories in
batches, crashes that re-run a batch from the value stored before it (while the worker keeps the
newer state), batches given to a worker that kept nothing, and bases at any point; the store ends
equal to the joined final rows, as with the whole state pickled per batch."""
from __future__ import annotations

import pickle
import random
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from derived.nested import NestedState
from pipelines.documents import saved_state
from pipelines.documents.documents_query import _apply_delta, _delta
from pipelines.documents.nested_fold import FoldState, fold_batch
from tests.unit.pipelines.documents.test_nested_fold import KEYS, MARKERS, SPEC, deliveries, history, joined


@pytest.fixture(autouse=True)
def nothing_kept():
    saved_state.forget()
    yield
    saved_state.forget()


def fresh() -> FoldState:
    return FoldState(NestedState(SPEC, dict(KEYS)))


def load(blob: bytes | None) -> tuple[FoldState, saved_state.Saved | None, bool]:
    return saved_state.load(blob, "orders", fresh, lambda b: pickle.loads(bytes(b)), _apply_delta)


def fold(blob: bytes | None, batch: list[dict[str, Any]]) -> tuple[bytes, list, bool]:
    """One batch as fold_fn runs it: (the value stored, the documents, whether the kept state was used)."""
    held, saved, kept = load(blob)
    outs, _, dead = fold_batch(held, batch, {}, MARKERS, {})
    assert not dead
    blob, saved, _ = saved_state.save(held, saved, _delta(held))
    saved_state.keep("orders", saved, held)
    return blob, outs, kept


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 10_000), st.integers(5, 70), st.sampled_from([0.0, 0.05, 0.5, 10.0]), st.integers(1, 64))
def test_documents_end_equal_to_the_joined_final_rows(seed: int, steps: int, share: float, most: int):
    rnd = random.Random(seed)
    log, db = history(rnd, steps)
    store: dict[str, tuple[Any, Any]] = {}
    blob = None
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(saved_state, "REBASE_SHARE", share)
        mp.setattr(saved_state, "MAX_DELTAS", most)
        for batch in deliveries(log, rnd):
            if rnd.random() < 0.2:   # a crash after the state was stored, before the batch was committed
                fold(blob, batch)
            if rnd.random() < 0.2:   # the batch goes to a worker that keeps nothing
                saved_state.forget()
            blob, outs, _ = fold(blob, batch)
            for o in outs:
                held = store.get(o.doc_id)
                assert held is None or held[0] <= o.version or held[1] == o.doc, (o.doc_id, o.version, held)
                store[o.doc_id] = (o.version, o.doc)
    assert {k: doc for k, (_, doc) in store.items() if doc is not None} == joined(db)
    if blob is not None:   # and the value alone, without the kept state, is that state
        (_, kept_state), = saved_state._kept.values()
        saved_state.forget()
        alone, _, kept = load(blob)
        assert not kept and _held(alone) == _held(kept_state)


def _held(state: FoldState) -> tuple:
    model = state.model
    index = {k: {v: keys for v, keys in idx.items() if keys} for k, idx in model._index.items()}
    return model.rows, model.touched, model.cuts, index, state.fences


def test_the_kept_state_is_used_only_for_the_value_it_saved():
    log, _ = history(random.Random(3), 30)
    first, second = deliveries(log, random.Random(4))[:2]
    blob1, _, kept = fold(None, first)
    assert not kept
    blob2, _, kept = fold(blob1, second)
    assert kept   # the worker's own state, saved with blob1
    # The second batch again from blob1 (not committed): the worker keeps blob2's state, so it rebuilds.
    held, _, kept = load(blob1)
    assert not kept
    again, _, _ = load(blob1)   # nothing kept now (a load takes the kept state out)
    assert _held(held) == _held(again)


def test_a_fold_that_fails_leaves_nothing_kept():
    log, _ = history(random.Random(5), 20)
    (first, *_) = deliveries(log, random.Random(6))
    blob, _, _ = fold(None, first)
    held, _, kept = load(blob)
    assert kept
    # (the fold raised here: the state it folded into is not kept for the batch's rerun)
    assert load(blob)[2] is False


def test_deltas_until_they_add_up_to_a_share_of_the_base_then_a_new_base():
    state = fresh()
    blob, saved, rebased = saved_state.save(state, None, _delta(state))
    assert rebased and saved.deltas == []
    grown = []
    for i in range(200):
        state.model.apply(_line(i))
        blob, saved, rebased = saved_state.save(state, saved, _delta(state))
        grown.append(rebased)
        assert sum(map(len, saved.deltas)) <= saved_state.REBASE_SHARE * len(saved.base)
        assert len(saved.deltas) <= saved_state.MAX_DELTAS
    assert 1 <= sum(grown) < 100   # mostly deltas
    decoded = saved_state.decode(blob)
    assert decoded.token == saved.token and bytes(decoded.base) == bytes(saved.base)
    assert decoded.deltas == saved.deltas


def test_a_state_saved_whole_before_bases_loads_and_is_saved_as_a_base():
    state = fresh()
    state.model.apply(_line(1))
    old = pickle.dumps(state)   # what the query stored before
    assert saved_state.decode(old) is None
    held, saved, kept = load(old)
    assert saved is None and not kept and held.model.rows == state.model.rows
    blob, saved, rebased = saved_state.save(held, saved, _delta(held))
    assert rebased and blob.startswith(saved_state.MAGIC)


def _line(i: int):
    from derived.change import Change, Position, Version

    return Change("public.lines", "upsert", {"id": i}, str(i), {"id": i, "order_id": i % 7, "line_no": i, "sku": "s"},
                  Version(100 + i, 1, 100 + i), Position("cdc.public.lines", 0, i))
