"""Row filters and soft deletes where changes are applied (pipelines/apply/row_filters.py): each
store ends holding exactly the final rows its filter keeps, whatever the batches, redeliveries and
moves in and out of the filter; TOAST columns are read before a row is judged."""
from hypothesis import given, settings, strategies as st

from derived.change import Change, Position, Version
from derived.sinks.cache.sink import CacheTable
from derived.sinks.memory import VersionedStore
from derived.sinks.search.sink import SearchTable
from derived.sinks.store_errors import StoreUnavailable
from pipelines.apply.batch import apply_changes, apply_records, for_store, prepare
from pipelines.apply.rebuild_fold import fold
from pipelines.apply.stats import BatchStats
from pipelines.apply.row_filters import RowFilters
from pipelines.apply.stores import Stores
from tests.support.letters import NoLetters
from tests.support.records import MARKERS, TOPIC, key, rec, value

TYPES = {"public.items": {"id": "integer", "name": "text"}}
# The search index holds names starting with 'a'; the cache every row not marked 'gone'.
SPECS = {"public.items": {"search": ("name starts with 'a'", None), "cache": (None, ("name", "gone"))}}


def stores(toast=None):
    search, cache = VersionedStore(), VersionedStore()
    s = Stores(search, cache, {"public.items": SearchTable("items")}, {"public.items": CacheTable("item:{id}")},
               {"public.items": None}, MARKERS, toast=toast, filters=RowFilters(SPECS, TYPES.__getitem__),
               whole_rows=frozenset(SPECS))
    return s, search, cache


def held(store):
    return {int(d): row["name"] for d, row in store.rows().items()}


ops = st.lists(st.tuples(st.integers(1, 4), st.sampled_from(["a1", "a2", "b1", "gone", None, "delete"])),
               min_size=1, max_size=40)


@given(ops, st.integers(1, 6), st.booleans())
@settings(max_examples=300, deadline=None)
def test_each_store_ends_with_exactly_the_rows_its_filter_keeps(changes, batch, redeliver):
    records, final, lsn = [], {}, 100
    for i, (row_id, name) in enumerate(changes):
        lsn += 10
        if name == "delete":
            records.append(rec(i, key(row_id), value("d", row_id, lsn, prev_commit=lsn - 5)))
            final.pop(row_id, None)
        else:
            records.append(rec(i, key(row_id), value("u", row_id, lsn, name or "", prev_commit=lsn - 5)))
            final[row_id] = name or ""
    s, search, cache = stores()
    for first in range(0, len(records), batch):
        apply_records(records[first:first + batch], s, {}, NoLetters())
    if redeliver:   # Connect resends a suffix after a crash: nothing changes
        apply_records(records[len(records) // 2:], s, {}, NoLetters())
    assert held(search) == {k: v for k, v in final.items() if v.startswith("a")}
    assert held(cache) == {k: v for k, v in final.items() if v != "gone"}
    # The rebuild: the log folded, then the same preparation, into empty stores.
    fresh, search, cache = stores()
    survivors = fold(records, {"public.items": None}, {TOPIC: "public.items"}).survivors()
    prepare(fresh, survivors, every_upsert=True)
    apply_changes(fresh, [], survivors, BatchStats(), [], [])
    assert held(search) == {k: v for k, v in final.items() if v.startswith("a")}
    assert held(cache) == {k: v for k, v in final.items() if v != "gone"}


def test_a_row_leaving_the_filter_is_deleted_at_its_version_and_comes_back_whole():
    s, search, cache = stores()
    apply_records([rec(0, key(1), value("c", 1, 100, "a1", 90))], s, {}, NoLetters())
    stats = apply_records([rec(1, key(1), value("u", 1, 110, "gone", 105))], s, {}, NoLetters())
    assert held(search) == {} and held(cache) == {} and stats.filtered_out == 2
    # An older change redelivered cannot bring it back: the delete holds the newer version.
    apply_records([rec(0, key(1), value("c", 1, 100, "a1", 90))], s, {}, NoLetters())
    assert held(search) == {} and held(cache) == {}
    apply_records([rec(2, key(1), value("u", 1, 120, "a2", 115))], s, {}, NoLetters())
    assert held(search) == {1: "a2"} and held(cache) == {1: "a2"}


class FakeToast:
    def __init__(self, rows, fail=False):
        self.rows, self.fail, self.failed, self.asked = rows, fail, False, []

    def mark_snapshot_dates(self, changes):
        return 0

    def fill(self, changes, every_upsert=False):
        self.failed = False
        wanted = [c for c in changes if c.op == "upsert" and c.unavailable and (c.created or every_upsert or c.reread)]
        self.asked += [c.doc_id for c in wanted]
        if self.fail and wanted:
            self.failed = True
            return 0
        for c in wanted:
            if c.doc_id in self.rows:
                c.row = {**c.row, **self.rows[c.doc_id]}
                c.unavailable = ()
        return len(wanted)


def toasted(name_unchanged: bool = True) -> Change:
    return Change("public.items", "upsert", {"id": 1}, "1", {"id": 1}, Version(200, 1, 200),
                  Position("cdc.public.items", 0, 5), unavailable=("name",) if name_unchanged else ())


def test_an_unchanged_toast_column_is_read_before_the_row_is_judged():
    toast = FakeToast({"1": {"name": "a-long-text"}})
    s, _, _ = stores(toast)
    c = toasted()
    reread, filtered = prepare(s, [c])
    assert toast.asked == ["1"] and c.row["name"] == "a-long-text" and c.hidden == () and filtered == 0


def test_a_failed_read_retries_the_batch_instead_of_judging_a_partial_row():
    s, _, _ = stores(FakeToast({}, fail=True))
    try:
        prepare(s, [toasted()])
    except StoreUnavailable as exc:
        assert "name" in str(exc)
    else:
        raise AssertionError("judged a row without the column its filter reads")


def test_a_row_gone_from_postgres_is_left_out_until_its_delete_arrives():
    s, _, _ = stores(FakeToast({}))
    c = toasted()
    prepare(s, [c])
    assert set(c.hidden) == {"search", "cache"}
    assert [x.op for x in for_store([c], "search")] == ["delete"]


def test_a_whole_row_table_never_writes_a_partial_row_of_a_row_gone_since():
    """A filtered (or transformed) table's upsert whose TOAST column Postgres no longer has (the row
    deleted since): no store gets the partial row; the delete that follows removes the old one."""
    s, search, cache = stores(FakeToast({}))
    c = toasted()
    c.row = {"id": 1, "name": "a1"}   # matches both filters; its other TOAST column cannot be read
    c.unavailable = ("body",)
    prepare(s, [c])
    assert set(c.hidden) == {"search", "cache"}


def test_an_upsert_without_a_column_its_lookups_read_is_completed_first():
    from derived.sinks.memory import NullStore

    s = Stores(NullStore(), NullStore(), {}, {}, {"public.items": None}, MARKERS,
               lookup_columns={"public.items": frozenset({"customer"})})

    def upsert(unavailable):
        return Change("public.items", "upsert", {"id": 1}, "1", {"id": 1}, Version(1, 1, 1), Position("t", 0, 1),
                      unavailable=unavailable)

    assert s.needs_whole_row(upsert(("customer",)))
    assert not s.needs_whole_row(upsert(("notes",))) and not s.needs_whole_row(upsert(()))
