from dataclasses import dataclass, field

from derived.sinks.cache.sink import CacheTable
from derived.change import Change, Position, Version
from derived.shape import shape, shaped_field


@dataclass
class T:
    columns: list | None = None
    rename: dict = field(default_factory=dict)


def test_projection_and_renames():
    row = {"id": 1, "email": "e", "secret": "s"}
    assert shape(row, T(["id", "email"], {"email": "contact"})) == {"id": 1, "contact": "e"}
    assert shape(row, T()) == row
    assert shaped_field("secret", T(["id"])) is None


def test_cache_key_and_scan_pattern():
    t = CacheTable("cust:{id}:{_id}")
    ch = Change("public.c", "upsert", {"id": 7}, "7", {}, Version(1, 1, 1), Position("x", 0, 0))
    assert t.key(ch) == "cust:7:7"
    assert CacheTable("a*b:{id}").pattern() == "a\\*b:*"
