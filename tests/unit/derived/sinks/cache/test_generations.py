"""A refused rebuild empties its spare database, never the live one."""
from derived.sinks.cache import generations as cachegen


class FakeRedis:
    def __init__(self, keys):
        self.keys = dict(keys)

    def get(self, key):
        return self.keys.get(key)

    def flushdb(self):
        self.keys.clear()


def test_a_refused_rebuild_empties_only_a_spare_database_holding_it():
    live, spare = FakeRedis({"k": b"live"}), FakeRedis({cachegen.MARK: b"r1", "k": b"fresh"})
    assert cachegen.discard(live, spare, "r1") and spare.keys == {} and live.keys == {"k": b"live"}
    assert not cachegen.discard(live, spare, "r1")          # a rerun finds nothing to do
    other = FakeRedis({cachegen.MARK: b"r0", "k": b"x"})
    assert not cachegen.discard(live, other, "r1") and other.keys
    swapped = FakeRedis({cachegen.MARK: b"r1"})              # the live database holds this rebuild
    assert not cachegen.discard(swapped, FakeRedis({cachegen.MARK: b"r1"}), "r1")
