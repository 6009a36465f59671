import uuid

import pytest
import redis

from derived.cache import CacheTable, RedisCache
from derived.change import Change, Position, Version

pytestmark = pytest.mark.integration


def ch(op, v, row=None, unavailable=()):
    return Change("public.t", op, {"id": 1}, "1", row, Version(v, 1, v), Position("x", 0, v), unavailable=unavailable)


def test_hash_format_ttl_and_deleted_version_retention(stack):
    r = redis.Redis.from_url(stack.redis_url)
    cache = RedisCache(r, deleted_version_ttl_s=120)
    prefix = f"h{uuid.uuid4().hex[:6]}"
    t = {"public.t": CacheTable(f"{prefix}:{{id}}", format="hash", ttl_s=600)}
    cache.apply([ch("upsert", 10, {"id": 1, "name": "ann", "tags": [1, 2], "gone": None})], t)
    assert cache.read(f"{prefix}:1", t["public.t"]) == {"id": "1", "name": "ann", "tags": "[1,2]", "gone": ""}
    assert 0 < r.ttl(f"{prefix}:1") <= 600
    # an unchanged TOAST column keeps its stored value
    cache.apply([ch("upsert", 11, {"id": 1, "tags": [3]}, unavailable=("name",))], t)
    assert cache.read(f"{prefix}:1", t["public.t"])["name"] == "ann"
    cache.apply([ch("delete", 12)], t)
    assert r.exists(f"{prefix}:1") == 0
    assert 0 < r.ttl(f"cdckit:v:{prefix}:1") <= 120
    assert cache.apply([ch("upsert", 11, {"id": 1})], t).stale == 1


def test_json_values_are_stored_exactly(stack):
    r = redis.Redis.from_url(stack.redis_url)
    cache = RedisCache(r, deleted_version_ttl_s=60)
    prefix = f"j{uuid.uuid4().hex[:6]}"
    t = {"public.t": CacheTable(f"{prefix}:{{id}}")}
    row = {"id": 1, "big": 9007199254740993, "f": 0.1, "s": "ünï"}
    cache.apply([ch("upsert", 10, row)], t)
    assert cache.read(f"{prefix}:1", t["public.t"]) == row
