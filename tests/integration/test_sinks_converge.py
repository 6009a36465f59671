"""Property: for any sequence of changes to a key and any replay of a suffix of it, applied one by
one in any order, both real stores converge to the last change (a delete stays deleted)."""
import uuid

import pytest
import redis
from hypothesis import HealthCheck, given, settings, strategies as st

from derived.sinks.cache.sink import CacheTable, RedisCache
from derived.change import Change, Position, Version
from derived.sinks.search.engines import OpenSearchEngine
from derived.sinks.search.sink import SearchSink, SearchTable

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stores(stack):
    cache = RedisCache(redis.Redis.from_url(stack.redis_url), deleted_version_ttl_s=3600)
    sink = SearchSink(OpenSearchEngine(stack.search_url), chunk=100, retries=1)
    return cache, sink


def change(i: int, op: str, snapshot: bool) -> Change:
    # Versions grow with i; a snapshot read at the same epoch sorts below a streamed change.
    version = Version(100 * i, 0 if snapshot else 1, 100 * i + 5)
    row = None if op == "delete" else {"id": 1, "v": i}
    return Change("public.p", op, {"id": 1}, "1", row, version, Position("t", 0, i), snapshot=snapshot)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.sampled_from(["upsert", "delete"]), st.booleans()), min_size=1, max_size=12),
       data=st.data())
def test_any_replay_converges_to_the_last_change(stores, ops, data):
    cache, sink = stores
    name = f"prop{uuid.uuid4().hex[:8]}"
    ctable, stable = CacheTable(f"{name}:{{id}}"), SearchTable(name)
    sink.prepare(stable)
    changes = [change(i + 1, op, snap) for i, (op, snap) in enumerate(ops)]
    cut = data.draw(st.integers(0, len(changes) - 1))
    order = data.draw(st.permutations(changes + changes[cut:]))
    for ch in order:
        cache.apply([ch], {"public.p": ctable})
        sink.apply([ch], {"public.p": stable})
    last = changes[-1]
    cached = cache.read(f"{name}:1", ctable)
    stored = sink.engine.mget(name, ["1"]).get("1")
    if last.op == "delete":
        assert cached is None and stored is None
    else:
        assert cached == last.row and stored == last.row
    sink.engine.delete_index(f"{name}_v1")
