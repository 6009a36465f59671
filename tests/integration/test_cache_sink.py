import uuid

import pytest
import redis

from derived.sinks.cache.sink import CacheTable, RedisCache
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


def test_a_tombstone_only_delete_removes_what_is_held(stack):
    from dataclasses import replace

    from derived.change import UNKNOWN

    r = redis.Redis.from_url(stack.redis_url)
    cache = RedisCache(r, deleted_version_ttl_s=60)
    prefix = f"f{uuid.uuid4().hex[:6]}"
    t = {"public.t": CacheTable(f"{prefix}:{{id}}")}
    forget = replace(ch("delete", 0), version=UNKNOWN, tombstone=True)
    cache.apply([ch("upsert", 10, {"id": 1})], t)
    assert cache.apply([forget], t).applied == 1 and r.exists(f"{prefix}:1") == 0
    # The version kept is just below the held one: an older replay stays deleted, a redelivered
    # copy of the very change it held is applied again (Connect resends a suffix after a crash).
    assert r.get(f"cdckit:v:{prefix}:1") == Version(10, 1, 9).redis().encode()
    assert cache.apply([ch("upsert", 9, {"id": 1})], t).stale == 1
    assert cache.apply([ch("upsert", 10, {"id": 1})], t).applied == 1
    assert cache.apply([ch("upsert", 20, {"id": 1})], t).applied == 1  # a re-insert is newer
    held = Version(10 ** 10, 1, 0).redis()
    r.set(f"cdckit:v:{prefix}:1", held)  # the decrement borrows across the digits
    cache.apply([forget], t)
    assert r.get(f"cdckit:v:{prefix}:1") == Version(10 ** 10, 0, 10 ** 20 - 1).redis().encode()


def test_an_unchanged_toast_field_is_merged_without_touching_other_values(stack):
    # Lua's cjson would turn 9007199254741443 into 9.0071992547414e+15 and [] into {}: the merge
    # happens in Python from the stored text, and the write only if the key did not move meanwhile.
    r = redis.Redis.from_url(stack.redis_url)
    cache = RedisCache(r, deleted_version_ttl_s=60)
    prefix = f"m{uuid.uuid4().hex[:6]}"
    t = {"public.t": CacheTable(f"{prefix}:{{id}}")}
    first = {"id": 1, "big": 9007199254741443, "f": 0.1 + 0.2, "ts": 1795431054804788, "none": [], "obj": {},
             "toasted": "x" * 3000, "neg": -2**63}
    cache.apply([ch("upsert", 10, first)], t)
    update = {k: v for k, v in first.items() if k != "toasted"} | {"big": 9007199254741445}
    assert cache.apply([ch("upsert", 11, update, unavailable=("toasted",))], t).applied == 1
    assert cache.read(f"{prefix}:1", t["public.t"]) == first | {"big": 9007199254741445}
    raw = r.get(f"{prefix}:1")
    assert b'"big":9007199254741445' in raw and b'"none":[]' in raw and b'"obj":{}' in raw


def test_a_merge_read_at_a_version_that_moved_is_done_again(stack):
    r = redis.Redis.from_url(stack.redis_url)
    cache = RedisCache(r, deleted_version_ttl_s=60)
    prefix = f"g{uuid.uuid4().hex[:6]}"
    t = {"public.t": CacheTable(f"{prefix}:{{id}}")}
    cache.apply([ch("upsert", 10, {"id": 1, "toasted": "old"})], t)
    real = cache._stored_json

    def stale_once(changes, tables):
        read = real(changes, tables)
        cache._stored_json = real
        cache.apply([ch("upsert", 11, {"id": 1, "toasted": "new"})], t)  # another writer, meanwhile
        return read

    cache._stored_json = stale_once
    assert cache.apply([ch("upsert", 12, {"id": 1, "n": 2}, unavailable=("toasted",))], t).applied == 1
    assert cache.read(f"{prefix}:1", t["public.t"]) == {"id": 1, "n": 2, "toasted": "new"}


def test_a_key_holding_another_type_is_a_dead_letter_and_the_rest_is_written(stack):
    r = redis.Redis.from_url(stack.redis_url)
    cache = RedisCache(r, deleted_version_ttl_s=60)
    prefix = f"w{uuid.uuid4().hex[:6]}"
    t = {"public.t": CacheTable(f"{prefix}:{{id}}", format="hash")}
    r.set(f"{prefix}:1", "someone else's string")
    other = Change("public.t", "upsert", {"id": 2}, "2", {"id": 2}, Version(5, 1, 5), Position("x", 0, 5))
    stats = cache.apply([ch("upsert", 10, {"id": 1, "n": 1}, unavailable=("name",)), other], t)
    assert stats.applied == 1 and [d.reason[:16] for d in stats.dead] == ["redis: WRONGTYPE"]
    assert stats.dead[0].position.offset == 10
    assert cache.read(f"{prefix}:2", t["public.t"]) == {"id": "2"}


@pytest.mark.parametrize("fmt", ["json", "hash"])
def test_out_of_memory_is_an_outage_not_a_letter(stack, fmt):
    from derived.sinks.store_errors import StoreUnavailable

    r = redis.Redis.from_url(stack.redis_url)
    cache = RedisCache(r, deleted_version_ttl_s=60)
    t = {"public.t": CacheTable(f"m{uuid.uuid4().hex[:6]}:{{id}}", format=fmt)}
    old = r.config_get("maxmemory")["maxmemory"], r.config_get("maxmemory-policy")["maxmemory-policy"]
    r.config_set("maxmemory-policy", "noeviction")
    r.config_set("maxmemory", 1)
    try:
        with pytest.raises(StoreUnavailable, match="maxmemory"):
            cache.apply([ch("upsert", 10, {"id": 1, "n": 1})], t)
        assert r.exists(t["public.t"].key(ch("upsert", 10))) == 0   # nothing written (a hash key's DEL is not refused)
    finally:
        r.config_set("maxmemory", old[0])
        r.config_set("maxmemory-policy", old[1])


@pytest.mark.parametrize("fmt", ["json", "hash"])
def test_plain_upserts_in_calls_of_many_keep_every_rule(stack, fmt):
    """Plain upserts go in script calls of many keys: versions, TTLs, deletes beside them, and one
    key of another type in the middle of a call (only that one is a letter; the call writes the
    rest)."""
    r = redis.Redis.from_url(stack.redis_url)
    cache = RedisCache(r, deleted_version_ttl_s=60)
    prefix = f"n{uuid.uuid4().hex[:6]}"
    t = {"public.t": CacheTable(f"{prefix}:{{id}}", format=fmt, ttl_s=600)}

    def up(i, v, row=None):
        return Change("public.t", "upsert", {"id": i}, str(i), row or {"id": i, "v": v, "big": 2**63 - i},
                      Version(v, 1, v), Position("x", 0, i))

    n = RedisCache.MANY * 2 + 7
    assert cache.apply([up(i, 10) for i in range(n)], t).applied == n
    r.delete(f"{prefix}:{n - 1}")
    odd = RedisCache.MANY + 4   # inside the second call, a newer version: written if it could be
    r.delete(f"cdckit:v:{prefix}:{odd}")
    r.rpush(f"cdckit:v:{prefix}:{odd}", "someone else's list")
    stale_and_new = [up(i, 9 if i % 2 else 11) for i in range(n)]
    delete = Change("public.t", "delete", {"id": 0}, "0", None, Version(12, 1, 12), Position("x", 0, n))
    stats = cache.apply(stale_and_new[1:] + [delete], t)
    assert [d.position.offset for d in stats.dead] == [odd]
    newer = [i for i in range(1, n) if i % 2 == 0 and i != odd]
    assert stats.applied == len(newer) + 1
    assert r.exists(f"{prefix}:0") == 0
    for i in (1, 2, RedisCache.MANY + 1, RedisCache.MANY + 2, n - 2):
        got = cache.read(f"{prefix}:{i}", t["public.t"])
        v = 11 if i % 2 == 0 else 10
        assert got == ({"id": i, "v": v, "big": 2**63 - i} if fmt == "json" else
                       {"id": str(i), "v": str(v), "big": str(2**63 - i)}), i
        assert 0 < r.ttl(f"{prefix}:{i}") <= 600 and 0 < r.ttl(f"cdckit:v:{prefix}:{i}") <= 600
    assert int(r.get(f"cdckit:count:{prefix}:{{id}}")) == n   # key n-1 written again after its DEL


def test_a_key_the_acl_refuses_is_its_own_letter_in_a_call_of_many(stack):
    """Redis refuses a whole script call when one of its keys is outside the user's ACL: the keys
    are then written one call each and only the refused one is a letter."""
    admin = redis.Redis.from_url(stack.redis_url)
    prefix = f"a{uuid.uuid4().hex[:6]}"
    user, password = f"u{prefix}", uuid.uuid4().hex
    admin.acl_setuser(user, enabled=True, passwords=[f"+{password}"], keys=["cdckit:*", f"{prefix}:ok*"],
                      commands=["+@all"])
    try:
        r = redis.Redis.from_url(stack.redis_url, username=user, password=password)
        cache = RedisCache(r, deleted_version_ttl_s=60)
        t = {"public.t": CacheTable(f"{prefix}:{{id}}")}
        changes = [Change("public.t", "upsert", {"id": i}, i, {"id": i}, Version(5, 1, 5), Position("x", 0, n))
                   for n, i in enumerate(["ok1", "no", "ok2"])]
        stats = cache.apply(changes, t)
        assert stats.applied == 2 and [d.position.offset for d in stats.dead] == [1]
        assert "permissions" in stats.dead[0].reason
        assert cache.read(f"{prefix}:ok2", t["public.t"]) == {"id": "ok2"}
    finally:
        admin.acl_deluser(user)
