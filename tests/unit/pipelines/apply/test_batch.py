"""Truncates in the live path: a keyed marker row, applied after every other write of its batch."""
from derived.sinks.cache.sink import CacheTable
from derived.change import DeadLetter
from derived.sinks.protocol import SinkResult
from derived.sinks.search.sink import SearchTable
from pipelines.apply.batch import SPARK_TASK, apply_records, apply_truncates
from pipelines.apply.stores import Stores
from pipelines.apply.stats import add_stats
from pipelines.spark.partition_apply import apply_rows, stats_of
from tests.support.records import MARKERS, key, rec, truncate_marker, value
from derived.sinks.memory import VersionedStore
from tests.support.letters import NoLetters


def names(store):
    return {d: row["name"] for d, row in store.rows().items()}


def stores():
    store = VersionedStore()
    return Stores(store, VersionedStore(), {"public.items": SearchTable("items")},
                  {"public.items": CacheTable("item:{id}")}, {"public.items": None}, MARKERS), store


MARKER_TOPIC = f"cdc.{MARKERS}"
# Transaction at commit 200..: insert 1; TRUNCATE (marker at lsn 210); insert 2. Row 3 is older.
BEFORE = [rec(0, key(3), value("c", 3, 150, "three", 100)), rec(1, key(1), value("c", 1, 205, "one", 200))]
AFTER = [rec(2, key(2), value("c", 2, 215, "two", 200))]
MARKER = [rec(0, *truncate_marker(lsn=210, prev_commit=200), topic=MARKER_TOPIC)]


def test_a_marker_in_one_task_cuts_older_rows_another_task_writes_later():
    s, search = stores()
    # The marker's task runs first; the rows' partition is applied after it (parallel tasks).
    out = [*apply_rows([MARKER], s, NoLetters(), {}, how=SPARK_TASK),
           *apply_rows([BEFORE + AFTER], s, NoLetters(), {}, how=SPARK_TASK)]
    assert names(search) == {"1": "one", "2": "two", "3": "three"}  # nothing cut yet: deferred
    total = stats_of(out[0])
    for row in out[1:]:
        add_stats(total, stats_of(row))
    assert set(total.truncate_cuts) == {"public.items"} and total.truncates == 1
    apply_truncates(s, total.truncate_cuts)  # the driver, once every task is done
    assert names(search) == {"2": "two"}


def test_in_one_task_the_truncate_comes_after_the_batch_writes():
    s, search = stores()
    stats = apply_records(BEFORE + AFTER + MARKER, s, {}, NoLetters())
    assert names(search) == {"2": "two"} and stats.truncates == 1


def test_snapshot_read_of_a_marker_truncates_nothing():
    s, search = stores()
    read = rec(0, *truncate_marker(lsn=210, prev_commit=200, op="r", snapshot="true"), topic=MARKER_TOPIC)
    stats = apply_records(BEFORE + [read], s, {}, NoLetters())
    assert names(search) == {"1": "one", "3": "three"} and stats.truncates == 0


def test_a_tombstone_whose_delete_was_compacted_away_deletes_the_row():
    s, search = stores()
    apply_records([rec(0, key(1), value("c", 1, 100, "one", 90)), rec(1, key(2), value("c", 2, 110, "two", 100))],
                  s, {}, NoLetters())
    # The job lagged behind the cleaner: key 1's op=d record is gone, its tombstone is left.
    stats = apply_records([rec(7, key(1), None)], s, {}, NoLetters())
    assert names(search) == {"2": "two"} and stats.tombstones == 1
    # A replay of an older change cannot bring it back (the held version stays).
    apply_records([rec(0, key(1), value("c", 1, 95, "older", 85))], s, {}, NoLetters())
    assert names(search) == {"2": "two"}
    # A re-insert after the delete is newer than anything held.
    apply_records([rec(9, key(1), value("c", 1, 300, "again", 290))], s, {}, NoLetters())
    assert names(search) == {"1": "again", "2": "two"}


def test_a_tombstone_before_a_newer_change_in_its_batch_is_void():
    s, search = stores()
    apply_records([rec(3, key(1), None), rec(4, key(1), value("c", 1, 300, "again", 290))], s, {}, NoLetters())
    assert names(search) == {"1": "again"}


class RefusingStore(VersionedStore):
    """A search generation whose mappings refuse every document."""

    def apply(self, changes, tables):
        stats = SinkResult()
        stats.dead = [DeadLetter(ch.position, None, None, "apply", "mapper_parsing_exception") for ch in changes]
        return stats


class Letters:
    def __init__(self):
        self.letters = []

    def write(self, letters):
        self.letters.extend(letters)
        return len(letters)


def test_rejections_of_a_rebuilds_fresh_generation_are_dead_lettered_once():
    live, _ = stores()
    fresh, _ = stores()
    fresh.search = RefusingStore()
    rows = [rec(0, key(1), value("c", 1, 100, "one", 90))]
    dlq = Letters()
    apply_records(rows, live, {}, dlq, rebuild=fresh)
    assert [(d.position.offset, d.extra, d.value) for d in dlq.letters] == [(0, {"generation": "rebuild"}, rows[0]["value"])]
    # Refused by both generations: one letter, the live one's.
    live.search, dlq = RefusingStore(), Letters()
    apply_records([rec(1, key(2), value("c", 2, 110, "two", 100))], live, {}, dlq, rebuild=fresh)
    assert [(d.position.offset, d.extra) for d in dlq.letters] == [(1, {})]


def test_a_store_the_config_leaves_out_counts_nothing_applied():
    """The null store in the cache's place keeps nothing: the batch's figures (log lines, metrics,
    rebuild and dead-letter replay summaries) say the cache got nothing, not every write."""
    from derived.sinks.memory import NullStore

    search = VersionedStore()
    s = Stores(search, NullStore(), {"public.items": SearchTable("items")}, {"public.items": CacheTable("item:{id}")},
               {"public.items": None}, MARKERS)
    stats = apply_records(BEFORE + AFTER, s, {}, NoLetters())
    assert names(search) == {"1": "one", "2": "two", "3": "three"}
    assert (stats.search_applied, stats.cache_applied, stats.cache_stale) == (3, 0, 0)
