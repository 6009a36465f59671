"""Search sink behaviour that needs no server (a scripted engine)."""
import pytest

from derived.sinks.errors import StoreUnavailable
from derived.sinks.search.sink import SearchSink, SearchTable
from tests.support.changes import ch

TABLES = {"public.t": SearchTable("t")}


class ScriptedEngine:
    def __init__(self, answers):
        self.answers, self.calls = list(answers), []

    def bulk(self, operations):
        self.calls.append(operations)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return {"items": [{"index": {"status": s}} for s in answer]}

    def mget(self, index, ids):
        return {}


def test_conflict_is_stale_and_rejection_is_a_dead_letter():
    engine = ScriptedEngine([[201, 409, 400]])
    stats = SearchSink(engine, retries=0).apply([ch(1), ch(2), ch(3)], TABLES)
    assert (stats.applied, stats.stale, len(stats.dead)) == (1, 1, 1)
    assert stats.dead[0].position.offset == 3 and "rejected" in stats.dead[0].reason


def test_only_throttled_items_are_retried():
    engine = ScriptedEngine([[201, 429], [200]])
    stats = SearchSink(engine, retries=2).apply([ch(1), ch(2)], TABLES)
    assert stats.applied == 2 and len(engine.calls[1]) == 2  # one action + its document


def test_persistent_failure_fails_the_batch():
    engine = ScriptedEngine([ConnectionError("down")] * 3)
    with pytest.raises(StoreUnavailable, match="search"):
        SearchSink(engine, retries=2).apply([ch(1)], TABLES)


def test_a_read_the_writes_need_is_retried_then_an_outage():
    from dataclasses import replace

    from derived.change import UNKNOWN

    class Down(ScriptedEngine):
        def versions(self, index, ids):
            raise ConnectionError("refused")

    forget = replace(ch(1, "delete"), version=UNKNOWN, tombstone=True)
    with pytest.raises(StoreUnavailable, match="search: ConnectionError: refused"):
        SearchSink(Down([]), retries=1).apply([forget], TABLES)
