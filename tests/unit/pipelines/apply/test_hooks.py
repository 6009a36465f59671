"""Transform hooks where changes are applied (pipelines/apply/hooks.py): the typed row in, the
stored row out; an exception or a non-row is a dead letter with the key, and the change is left
out (the store keeps what it held)."""
import sys
import types

from derived.sinks.cache.sink import CacheTable
from derived.sinks.memory import VersionedStore
from derived.sinks.search.sink import SearchTable
from pipelines.apply.batch import apply_records
from pipelines.apply.stores import Stores
from tests.support.letters import NoLetters
from tests.support.records import MARKERS, key, rec, value


class Letters(NoLetters):
    def __init__(self):
        self.letters = []

    def write(self, letters):
        self.letters += letters
        return len(letters)


def install_hook():
    module = types.ModuleType("cdckit_test_hook")

    def enrich(row):
        if row["name"] == "boom":
            raise ValueError("cannot enrich boom")
        if row["name"] == "none":
            return None
        return {**row, "name_len": len(row["name"])}

    module.enrich = enrich
    sys.modules["cdckit_test_hook"] = module


def test_a_hook_shapes_rows_and_its_failures_are_dead_letters_with_their_key():
    install_hook()
    search, cache = VersionedStore(), VersionedStore()
    s = Stores(search, cache, {"public.items": SearchTable("items")}, {"public.items": CacheTable("item:{id}")},
               {"public.items": None}, MARKERS, hooks={"public.items": "cdckit_test_hook:enrich"})
    letters = Letters()
    apply_records([rec(0, key(1), value("c", 1, 100, "abc", 90))], s, {}, letters)
    assert search.rows() == {"1": {"id": 1, "name": "abc", "name_len": 3}} == cache.rows()
    stats = apply_records([rec(1, key(1), value("u", 1, 110, "boom", 105)),
                           rec(2, key(2), value("c", 2, 120, "none", 115))], s, {}, letters)
    assert stats.dead_letters == 2 and search.rows() == {"1": {"id": 1, "name": "abc", "name_len": 3}}
    boom = next(d for d in letters.letters if d.position.offset == 1)
    assert boom.stage == "transform" and "cannot enrich boom" in boom.reason and boom.key == key(1)
    assert boom.value is not None and boom.extra["table"] == "public.items"   # its record, for `dlq replay`
