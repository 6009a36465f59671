"""Search sink behaviour that needs no server (a scripted engine), and both real client adapters."""
import uuid

import pytest

from derived.errors import StoreUnavailable
from derived.change import Change, Position, Version
from derived.search import ElasticsearchEngine, OpenSearchEngine, SearchSink, SearchTable

TABLES = {"public.t": SearchTable("t")}


def ch(i: int, op: str = "upsert", version: int = 10) -> Change:
    return Change("public.t", op, {"id": i}, str(i), None if op == "delete" else {"id": i},
                  Version(version, 1, version), Position("x", 0, i))


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


@pytest.mark.integration
@pytest.mark.parametrize("engine_cls", [OpenSearchEngine, ElasticsearchEngine])
def test_both_client_adapters_write_versioned(stack, engine_cls):
    sink = SearchSink(engine_cls(stack.search_url))
    alias = f"adapt{uuid.uuid4().hex[:8]}"
    table = SearchTable(alias, mappings={"id": {"type": "long"}})
    tables = {"public.t": table}
    sink.ensure_index(table)
    sink.ensure_index(table)  # idempotent
    assert sink.engine.alias_targets(alias) == [f"{alias}_v1"]
    assert sink.apply([ch(1, version=20)], tables).applied == 1
    assert sink.apply([ch(1, version=10)], tables).stale == 1      # older: refused
    assert sink.apply([ch(1, "delete", version=30)], tables).applied == 1
    assert sink.apply([ch(1, version=25)], tables).stale == 1      # no resurrection
    sink.engine.refresh(alias)
    assert sink.engine.count(alias) == 0
    sink.engine.delete_index(f"{alias}_v1")
