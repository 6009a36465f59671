"""A document's fold state as its query saves it: a base (the whole state, pickled now and then)
and the deltas of the batches since (what each changed: NestedState.take_changes), and the Python
worker that folded the last batch keeping the state it saved, so that its next batch neither
unpickles nor pickles the whole state.

Why: pickling the whole state per batch cost in proportion to the tables' rows, not to the batch:
at 400 commits/s on two cores the state's load and save were 0.40 s of a 0.66 s fold task
(benchmarks/README.md, nested documents). A delta costs in proportion to the rows the batch changed.

Exact as before: the state store's value is still the whole state (base and deltas); a worker's
kept state is used only when the token it saved matches the value's, so a batch run again from the
state of the batch before (a crash, a retried task), or given to another worker, rebuilds the state
from the value. The query's fold runs in a pool of Python workers of its own (documents_query), so
one document's batches reach the worker that keeps its state.
"""
from __future__ import annotations

import gc
import os
import pickle
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

MAGIC = b"cdckit-fold-state-2\n"
_TOKEN = 16
# A new base once the deltas add up to this share of it (each delta is written with the base every
# batch, and a worker without the kept state replays them all), or this many of them.
REBASE_SHARE = 0.5
MAX_DELTAS = 64
KEPT_PER_WORKER = 2   # documents whose states a worker keeps (the most recently folded)
# Frozen objects are never walked again, so garbage in a cycle among them would stay: now and then
# everything is thawed and collected once (one walk over the kept state) before freezing again.
THAW_EVERY = 100


@dataclass
class Saved:
    token: bytes
    base: bytes | memoryview
    deltas: list[bytes] = field(default_factory=list)


def encode(saved: Saved) -> bytes:
    return b"".join((MAGIC, saved.token, len(saved.base).to_bytes(8, "big"), saved.base,
                     pickle.dumps(saved.deltas, protocol=pickle.HIGHEST_PROTOCOL)))


def decode(blob: bytes) -> Saved | None:
    """None: a state saved whole, before bases and deltas."""
    if not blob.startswith(MAGIC):
        return None
    view = memoryview(blob)
    at = len(MAGIC)
    token = bytes(view[at:at + _TOKEN])
    size = int.from_bytes(view[at + _TOKEN:at + _TOKEN + 8], "big")
    start = at + _TOKEN + 8
    return Saved(token, view[start:start + size], pickle.loads(view[start + size:]))


# The states this worker saved last, by document: (token, state). Reached through the functions
# below: a function shipped to a worker carries copies of the module globals it names itself.
_kept: OrderedDict[str, tuple[bytes, Any]] = OrderedDict()


def load(blob: bytes | None, name: str, fresh: Callable[[], Any], unpickle: Callable[[bytes | memoryview], Any],
         apply_delta: Callable[[Any, dict], None]) -> tuple[Any, Saved | None, bool]:
    """(the state, how it was saved, whether the state kept by this worker was it). The kept state
    leaves the worker's keeping while a batch folds into it: a fold that fails leaves nothing kept."""
    kept = _kept.pop(name, None)
    if blob is None:
        return fresh(), None, False
    saved = decode(blob)
    if saved is None:
        return unpickle(blob), None, False
    if kept is not None and kept[0] == saved.token:
        return kept[1], saved, True
    kept = None   # another version's (freed before the base is unpickled)
    state = unpickle(saved.base)
    for delta in saved.deltas:
        apply_delta(state, pickle.loads(delta))
    return state, saved, False


def save(state: Any, previous: Saved | None, delta: dict) -> tuple[bytes, Saved, bool]:
    """(the value to store, what it holds, whether it is a new base) after a batch: the previous
    base with `delta` (the batch's changes) added, or the whole state as a new base when due."""
    token = os.urandom(_TOKEN)
    pickled = pickle.dumps(delta, protocol=pickle.HIGHEST_PROTOCOL)
    if previous is None or len(previous.deltas) >= MAX_DELTAS or (
            sum(map(len, previous.deltas)) + len(pickled) > REBASE_SHARE * len(previous.base)):
        saved = Saved(token, pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))
        return encode(saved), saved, True
    saved = Saved(token, previous.base, [*previous.deltas, pickled])
    return encode(saved), saved, False


def keep(name: str, saved: Saved, state: Any) -> None:
    """Once the value is stored: this worker keeps the state for the document's next batch. Then out of
    the cyclic collector's sight (pyspark's daemon collects after every task: a walk over the whole
    kept state each time); what the task left in cycles is collected first, so none of it is frozen."""
    _kept[name] = (saved.token, state)
    _kept.move_to_end(name)
    while len(_kept) > KEPT_PER_WORKER:
        _kept.popitem(last=False)
    _keeps[0] += 1
    if _keeps[0] % THAW_EVERY == 0:
        gc.unfreeze()
    gc.collect()
    gc.freeze()


_keeps = [0]


def forget() -> None:
    """Nothing kept, nothing frozen (tests)."""
    _kept.clear()
    gc.unfreeze()
