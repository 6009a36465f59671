"""Redis lookups (derived/sinks/cache/lookups.py and the cache's scripts) on a real Redis: sets and
sorted sets keyed by a column stay exactly the database's rows through moves between keys, deletes,
key changes, truncates, rows leaving and re-entering the cache's filter (soft deletes too),
redeliveries, and a rebuild from the log; a key of another type refuses the row's whole write."""
from __future__ import annotations

import json

import pytest
import redis
from hypothesis import HealthCheck, given, settings, strategies as st

from connectors.envelope import decode_records
from derived.change import Change, Position, Version
from derived.sinks.cache.lookups import Lookup
from derived.sinks.cache.sink import CacheTable, RedisCache
from derived.sinks.memory import NullStore
from pipelines.apply.batch import apply_changes, apply_records, prepare
from pipelines.apply.rebuild_fold import PartitionFold
from pipelines.apply.row_filters import RowFilters
from pipelines.apply.stats import BatchStats
from pipelines.apply.stores import Stores
from tests.support.letters import NoLetters
from tests.support.records import MARKERS, rec as any_rec, truncate_marker
from tests.support.redis_server import private_redis

TABLE, TOPIC, MARKER_TOPIC = "public.orders", "cdc.public.orders", f"cdc.{MARKERS}"
TYPES = {"id": "integer", "customer": "integer", "amount": "numeric", "deleted": "boolean"}
LOOKUPS = (Lookup("by_customer:{customer}"), Lookup("top:{customer}", member="o{id}", score="amount"))
# The cache keeps orders not soft-deleted and not of customer 3 (SQL: a null customer is not kept).
FILTER = {TABLE: {"cache": ("customer <> 3", ("deleted", None))}}


@pytest.fixture(scope="module")
def redis_url():
    with private_redis() as url:
        yield url


def stores(url: str, db: int = 0) -> tuple[Stores, redis.Redis]:
    r = redis.Redis.from_url(url.rsplit("/", 1)[0] + f"/{db}")
    r.flushdb()
    s = Stores(NullStore(), RedisCache(r, 3600), {}, {TABLE: CacheTable("ord:{id}", lookups=LOOKUPS)}, {TABLE: None},
               MARKERS, filters=RowFilters(FILTER, lambda t: TYPES), whole_rows=frozenset({TABLE}),
               lookup_columns={TABLE: frozenset({"customer", "id", "amount"})})
    return s, r


def rec(offset: int, k: bytes | None, v: bytes | None, topic: str = TOPIC) -> dict:
    return any_rec(offset, k, v, topic=topic)


def key(id_: int) -> bytes:
    return json.dumps({"id": id_}).encode()


def value(op: str, id_: int, lsn: int, row: dict | None = None) -> bytes:
    after = None if op == "d" else {"id": id_, **(row or {})}
    seq = json.dumps([str(lsn - 5), str(lsn)])
    return json.dumps({"op": op, "after": after, "before": {"id": id_} if op == "d" else None, "ts_ms": 1,
                       "source": {"schema": "public", "table": "orders", "lsn": lsn, "snapshot": "false",
                                  "ts_ms": 1, "sequence": seq}}).encode()


def held(r: redis.Redis) -> dict:
    """Every lookup entry Redis holds, and the rows' keys."""
    out = {}
    for k in r.scan_iter(match="by_customer:*"):
        out[k.decode()] = {m.decode() for m in r.smembers(k)}
    for k in r.scan_iter(match="top:*"):
        out[k.decode()] = {m.decode(): s for m, s in r.zrange(k, 0, -1, withscores=True)}
    out["rows"] = {k.decode() for k in r.scan_iter(match="ord:*")}
    return out


def expected(rows: dict[int, dict]) -> dict:
    out: dict = {"rows": set()}
    for id_, row in rows.items():
        if row["deleted"] is True or row["customer"] is None or row["customer"] == 3:
            continue
        out["rows"].add(f"ord:{id_}")
        out.setdefault(f"by_customer:{row['customer']}", set()).add(str(id_))
        if row["amount"] is not None:
            out.setdefault(f"top:{row['customer']}", {})[f"o{id_}"] = float(row["amount"])
    return out


def apply(s: Stores, records: list[dict]) -> None:
    assert apply_records(records, s, {}, NoLetters()).dead_letters == 0


def test_a_row_moving_between_customers_leaves_nothing_behind(redis_url):
    s, r = stores(redis_url)
    row = {"customer": 1, "amount": "10.5", "deleted": False}
    apply(s, [rec(0, key(1), value("c", 1, 100, row)), rec(1, key(2), value("c", 2, 110, {**row, "amount": "2"}))])
    assert held(r) == {"by_customer:1": {"1", "2"}, "top:1": {"o1": 10.5, "o2": 2.0}, "rows": {"ord:1", "ord:2"}}
    apply(s, [rec(2, key(1), value("u", 1, 120, {**row, "customer": 2, "amount": "-1"}))])
    assert held(r) == {"by_customer:1": {"2"}, "by_customer:2": {"1"}, "top:1": {"o2": 2.0}, "top:2": {"o1": -1.0},
                       "rows": {"ord:1", "ord:2"}}
    # An older change redelivered moves nothing back.
    apply(s, [rec(0, key(1), value("c", 1, 100, row))])
    assert held(r)["by_customer:2"] == {"1"} and held(r)["by_customer:1"] == {"2"}
    # Soft-deleted, then undeleted; then out of the filter (customer 3); then deleted.
    apply(s, [rec(3, key(1), value("u", 1, 130, {**row, "customer": 2, "deleted": True}))])
    assert "by_customer:2" not in held(r) and "ord:1" not in held(r)["rows"]
    apply(s, [rec(4, key(1), value("u", 1, 140, {**row, "customer": 2}))])
    assert held(r)["by_customer:2"] == {"1"} and held(r)["top:2"] == {"o1": 10.5}
    apply(s, [rec(5, key(2), value("u", 2, 150, {**row, "customer": 3}))])
    assert "by_customer:1" not in held(r) and "top:1" not in held(r)
    apply(s, [rec(6, key(1), value("d", 1, 160)), rec(7, key(1), None)])
    assert held(r) == {"rows": set()}
    assert not list(r.scan_iter(match="cdckit:lk:*"))   # no row's record of its entries is left either


def test_a_truncate_empties_the_tables_lookups(redis_url):
    s, r = stores(redis_url)
    apply(s, [rec(n, key(n), value("c", n, 100 + n, {"customer": n % 2, "amount": "1", "deleted": None}))
              for n in range(1, 7)])
    assert len(held(r)["rows"]) == 6
    apply(s, [rec(0, *truncate_marker(200, 195, table=TABLE), topic=MARKER_TOPIC)])
    assert held(r) == {"rows": set()} and not list(r.scan_iter(match="cdckit:lk:*"))


def test_a_key_of_another_type_refuses_the_whole_write(redis_url):
    s, r = stores(redis_url)
    r.set("by_customer:9", "not a set")
    out = apply_records([rec(0, key(1), value("c", 1, 100, {"customer": 9, "amount": "1", "deleted": False})),
                         rec(1, key(2), value("c", 2, 110, {"customer": 8, "amount": "1", "deleted": False}))],
                        s, {}, letters := _Letters())
    assert out.dead_letters == 1 and "WRONGTYPE lookup key by_customer:9" in letters.got[0].reason
    assert r.get("ord:1") is None and not r.exists("top:9") and r.get("by_customer:9") == b"not a set"
    assert r.smembers("by_customer:8") == {b"2"}   # the other row of the call is written


def test_a_set_replaced_by_another_type_does_not_stop_the_rows_writes(redis_url):
    """Someone overwrote a key a row's entry was in: the entry went with it; the row's delete, move
    and the table's truncate go on whole (a script failing there would leave them half done)."""
    s, r = stores(redis_url)
    row = {"customer": 1, "amount": "1", "deleted": False}
    apply(s, [rec(0, key(1), value("c", 1, 100, row)), rec(1, key(2), value("c", 2, 110, row))])
    r.set("by_customer:1", "someone else's")
    apply(s, [rec(2, key(1), value("d", 1, 120)), rec(3, key(2), value("u", 2, 130, {**row, "customer": 2}))])
    assert r.get("ord:1") is None and r.get("cdckit:lk:ord:1") is None and r.get("cdckit:v:ord:1") is not None
    assert r.smembers("by_customer:2") == {b"2"} and r.zrange("top:1", 0, -1) == []
    r.set("by_customer:2", "again")
    apply(s, [rec(0, *truncate_marker(200, 195, table=TABLE), topic=MARKER_TOPIC)])
    assert r.get("ord:2") is None and not list(r.scan_iter(match="cdckit:lk:*")) and r.get("by_customer:2") == b"again"


def test_a_score_that_is_no_number_is_a_letter_naming_the_column(redis_url):
    s, r = stores(redis_url)
    letters = _Letters()
    apply_records([rec(0, key(1), value("c", 1, 100, {"customer": 1, "amount": "lots", "deleted": False}))], s, {},
                  letters)
    assert "score column amount" in letters.got[0].reason and r.get("ord:1") is None


def test_a_merged_toast_write_moves_entries_too(redis_url):
    """The single-key script (a row whose unchanged TOAST fields are merged) keeps lookups like the
    many-key one."""
    s, r = stores(redis_url)
    t = s.cache_tables[TABLE]
    s.cache.apply([_change(1, 10, {"customer": 1, "amount": "5", "note": "x" * 10})], {TABLE: t})
    s.cache.apply([_change(1, 20, {"customer": 2, "amount": "6"}, unavailable=("note",))], {TABLE: t})
    assert held(r) == {"by_customer:2": {"1"}, "top:2": {"o1": 6.0}, "rows": {"ord:1"}}
    assert json.loads(r.get("ord:1"))["note"] == "x" * 10


class _Letters:
    def __init__(self):
        self.got = []

    def write(self, letters):
        self.got += letters
        return len(letters)


def _change(id_, v, row, unavailable=()):
    return Change(TABLE, "upsert", {"id": id_}, str(id_), {"id": id_, **row}, Version(v, 1, v), Position(TOPIC, 0, v),
                  unavailable=unavailable)


# A history: upserts (a customer, an amount, the soft-delete flag), deletes, key changes, truncates.
# Few ids and mostly kept rows: rows move between two kept customers often (the case that leaves
# stale entries behind when a move does not take the old one back).
upserts = st.tuples(st.just("upsert"), st.integers(1, 3), st.sampled_from([1, 2, 1, 2, 3, None]),
                    st.sampled_from(["1.5", "-2", "10", None, "0.1"]), st.sampled_from([False, None, False, True]))
histories = st.lists(st.one_of(upserts, upserts, upserts, st.tuples(st.just("delete"), st.integers(1, 3)),
                               st.tuples(st.just("rekey"), st.integers(1, 3), st.integers(4, 6)),
                               st.tuples(st.just("truncate"))), min_size=1, max_size=40)


@given(histories, st.integers(1, 7), st.booleans())
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_live_and_rebuild_equal_the_model(redis_url, history, batch, redeliver):
    records, markers, rows, lsn = [], [], {}, 100
    for op in history:
        lsn += 10
        if op[0] == "upsert":
            _, id_, customer, amount, deleted = op
            row = {"customer": customer, "amount": amount, "deleted": deleted}
            records.append(rec(len(records), key(id_), value("u" if id_ in rows else "c", id_, lsn, row)))
            rows[id_] = row
        elif op[0] in ("delete", "rekey") and op[1] in rows:
            row = rows.pop(op[1])
            records += [rec(len(records), key(op[1]), value("d", op[1], lsn)), rec(len(records) + 1, key(op[1]), None)]
            if op[0] == "rekey":   # a primary key change: the old key's delete, the new key's create, one LSN
                records.append(rec(len(records), key(op[2]), value("c", op[2], lsn, row)))
                rows[op[2]] = row
        elif op[0] == "truncate":
            records.append(rec(len(markers), *truncate_marker(lsn, lsn - 5, table=TABLE), topic=MARKER_TOPIC))
            markers.append(records[-1])
            rows.clear()
    live, r = stores(redis_url, 0)
    for first in range(0, len(records), batch):
        apply(live, records[first:first + batch])
    if redeliver:   # Connect resends a suffix after a crash: nothing changes
        apply(live, records[len(records) // 2:])
    assert held(r) == expected(rows)
    # The rebuild: the table's log folded (cut at the newest truncate), into an empty database.
    fresh, r2 = stores(redis_url, 1)
    changes = decode_records(markers, {}, {TABLE: None}, {TABLE}, truncate_table=MARKERS)[0]
    cuts = {TABLE: max(c.version for c in changes)} if changes else {}
    fold = PartitionFold({TABLE: None}, {TOPIC: TABLE}, truncated=cuts, truncate_table=MARKERS)
    fold.add([x for x in records if x["topic"] == TOPIC])
    survivors = fold.survivors()
    prepare(fresh, survivors, every_upsert=True)
    apply_changes(fresh, [], survivors, BatchStats(), [], [])
    assert held(r2) == expected(rows)

