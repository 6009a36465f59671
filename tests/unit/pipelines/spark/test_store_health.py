"""The job's metrics carry status's two rules: unsettled dead letters per table, read on from the
last poll, and each store's entries beside Postgres' estimate."""
from contextlib import contextmanager
from types import SimpleNamespace

from connectors.kafka.dead_letter_topic import LetterTally
from pipelines.config import parse_config
from pipelines.spark import source_health as sh
from pipelines.spark import store_health
from pipelines.spark.metrics import PipelineMetrics
from pipelines.state import letters_settled as settled
from tests.support.configs import BASE


def get(m, name, labels=None):
    return m.registry.get_sample_value(name, labels or {})


class FakeTopic:
    """The dead-letter topic: letters by source topic; `tally_letters` reads [position, end)."""

    def __init__(self, monkeypatch):
        self.letters, self.reads = [], []
        monkeypatch.setattr("connectors.kafka.dead_letter_topic.topic_end", lambda conf, topic: len(self.letters))
        monkeypatch.setattr("connectors.kafka.dead_letter_topic.tally_letters", self.tally)

    def tally(self, conf, topic, start, end, limit, tally=None):
        if tally is None or tally.start != start:
            tally = LetterTally(start, start, {}, {})
        position = max(start, tally.position)
        self.reads.append((position, end))
        for source in self.letters[position:end]:
            tally.add(source, "refused")
        tally.end, tally.position = end, end
        return tally


def test_pending_letters_are_read_on_from_the_last_poll_and_again_from_a_moved_mark(monkeypatch, tmp_path):
    topic = FakeTopic(monkeypatch)
    pending = store_health.PendingLetters({}, "cdc.dlq", tmp_path, {"cdc.public.a": "public.a"}.get)
    topic.letters = ["cdc.public.a"] * 3
    assert pending() == {"public.a": 3}
    topic.letters += ["cdc.public.b"]
    assert pending() == {"public.a": 3, "cdc.public.b": 1} and topic.reads == [(0, 3), (3, 4)]
    settled.record_settled(tmp_path, 4)             # a replay settled them all
    assert pending() == {} and topic.reads[-1] == (4, 4)


def test_the_poller_sets_every_tables_pending_gauge_and_leaves_it_when_a_poll_fails():
    m = PipelineMetrics(0)
    answers = iter([{"public.a": 2}, RuntimeError("broker down"), {}])

    def letters():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    p = sh.SourcePoller(m, lambda: sh.ConnectorHealth(True), lambda: sh.SlotHealth(True, True, 0, 0),
                        lambda: (False, 0, 0), letters=letters, tables=("public.a", "public.b"))
    p.poll()
    assert (get(m, "cdckit_table_dead_letters_pending", {"table": "public.a"}),
            get(m, "cdckit_table_dead_letters_pending", {"table": "public.b"})) == (2, 0)
    p.poll()
    assert get(m, "cdckit_table_dead_letters_pending", {"table": "public.a"}) == 2
    p.poll()
    assert get(m, "cdckit_table_dead_letters_pending", {"table": "public.a"}) == 0


class FakeConn:
    def execute(self, sql, args):
        return SimpleNamespace(fetchone=lambda: (48_884,) if args == ("public.customers",) else None)


def test_store_counts_beside_postgres_estimate_become_gauges():
    cfg = parse_config(BASE)

    @contextmanager
    def connect():
        yield FakeConn()

    stores = SimpleNamespace(search=SimpleNamespace(count=lambda table: 161), search_tables={
        "public.customers": SimpleNamespace(alias="customers")}, cache=SimpleNamespace(count=lambda table: 48_884),
        cache_tables={"public.customers": None})
    counts = store_health.store_counts(cfg, stores, connect)
    assert counts == {"public.customers": {"rows_estimate": 48_884.0, "search": 161, "cache": 48_884}}
    m = PipelineMetrics(0)
    m.store_counts(counts)
    assert get(m, "cdckit_table_rows_estimate", {"table": "public.customers"}) == 48_884
    assert get(m, "cdckit_table_store_count", {"table": "public.customers", "store": "search"}) == 161
    m.store_counts({"public.customers": {"rows_estimate": None, "search": None, "cache": 3}})
    assert get(m, "cdckit_table_rows_estimate", {"table": "public.customers"}) != \
        get(m, "cdckit_table_rows_estimate", {"table": "public.customers"})   # NaN: never analyzed
    assert get(m, "cdckit_table_store_count", {"table": "public.customers", "store": "search"}) == 161


def test_store_counts_are_polled_at_most_every_minute():
    now = [0.0]
    calls = []
    probe = store_health.throttled(lambda: calls.append(1) or {"t": {}}, 60, clock=lambda: now[0])
    assert probe() == {"t": {}}
    now[0] = 30
    assert probe() is None
    now[0] = 61
    assert probe() == {"t": {}} and len(calls) == 2
