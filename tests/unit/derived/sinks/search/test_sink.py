"""Search sink behaviour that needs no server (a scripted engine), and both real client adapters."""
import uuid

import pytest

from derived.sinks.errors import StoreUnavailable
from derived.change import Change, Position, Version
from derived.sinks.search.engines import ElasticsearchEngine, OpenSearchEngine
from derived.sinks.search.sink import SearchSink, SearchTable

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
    sink.prepare(table)
    sink.prepare(table)  # idempotent
    assert sink.engine.alias_targets(alias) == [f"{alias}_v1"]
    assert sink.apply([ch(1, version=20)], tables).applied == 1
    assert sink.apply([ch(1, version=10)], tables).stale == 1      # older: refused
    assert sink.apply([ch(1, "delete", version=30)], tables).applied == 1
    assert sink.apply([ch(1, version=25)], tables).stale == 1      # no resurrection
    sink.engine.refresh(alias)
    assert sink.engine.count(alias) == 0
    # A tombstone-only delete: at the stored version (a redelivered copy of that change applies again).
    from dataclasses import replace

    from derived.change import UNKNOWN

    assert sink.apply([ch(2, version=40)], tables).applied == 1
    forget = replace(ch(2, "delete"), version=UNKNOWN, tombstone=True)
    assert sink.apply([forget], tables).applied == 1
    assert sink.engine.versions(alias, ["2"]) == {}
    assert sink.apply([ch(2, version=39)], tables).stale == 1      # an older replay stays deleted
    assert sink.apply([replace(forget, doc_id="9")], tables).stale == 1  # nothing held
    assert sink.apply([ch(2, version=40)], tables).applied == 1    # the redelivered copy
    sink.engine.delete_index(f"{alias}_v1")


@pytest.mark.integration
def test_indices_remember_deleted_versions_as_configured(stack):
    import requests

    sink = SearchSink(OpenSearchEngine(stack.search_url), gc_deletes_s=86_400)
    alias = f"gc{uuid.uuid4().hex[:8]}"
    sink.prepare(SearchTable(alias))
    settings = requests.get(f"{stack.search_url}/{alias}_v1/_settings", timeout=10).json()
    assert settings[f"{alias}_v1"]["settings"]["index"]["gc_deletes"] == "86400s"
    sink.engine.delete_index(f"{alias}_v1")


@pytest.mark.integration
def test_a_truncate_never_deletes_what_was_written_at_its_own_version(stack):
    sink = SearchSink(OpenSearchEngine(stack.search_url))
    alias = f"tr{uuid.uuid4().hex[:8]}"
    table = SearchTable(alias)
    sink.prepare(table)
    tables = {"public.t": table}
    cut = Change("public.t", "truncate", {}, "", None, Version(50, 1, 500), Position("x", 0, 0))
    sink.apply([ch(1, version=40), ch(2, version=40)], tables)
    # Doc 2 is written at the cut's own external version after the scroll saw its older version
    # (later in the truncating transaction, or a re-snapshot's read): the delete must not win.
    real_scan = sink.engine.scan_versions

    def scan_then_write(index, page=5000):
        seen = list(real_scan(index, page))
        sink.apply([Change("public.t", "upsert", {"id": 2}, "2", {"id": 2, "after": True}, Version(50, 1, 600),
                           Position("x", 0, 9))], tables)
        return iter(seen)

    sink.engine.scan_versions = scan_then_write
    assert sink.truncate(cut, table) == 2
    sink.engine.refresh(alias)
    assert sink.engine.mget(alias, ["1", "2"]) == {"2": {"id": 2, "after": True}}
    sink.engine.delete_index(f"{alias}_v1")


def test_a_read_the_writes_need_is_retried_then_an_outage():
    from dataclasses import replace

    from derived.change import UNKNOWN

    class Down(ScriptedEngine):
        def versions(self, index, ids):
            raise ConnectionError("refused")

    forget = replace(ch(1, "delete"), version=UNKNOWN, tombstone=True)
    with pytest.raises(StoreUnavailable, match="search: ConnectionError: refused"):
        SearchSink(Down([]), retries=1).apply([forget], TABLES)


@pytest.mark.integration
def test_a_delete_of_a_document_not_there_yet_refuses_its_older_write(stack):
    """A rebuild's fresh index gets a live delete before the catch-up's older write of that key."""
    sink = SearchSink(OpenSearchEngine(stack.search_url), gc_deletes_s=86_400)
    alias = f"dm{uuid.uuid4().hex[:8]}"
    table = SearchTable(alias)
    sink.prepare(table)
    tables = {"public.t": table}
    sink.apply([ch(1, "delete", version=50)], tables)
    stats = sink.apply([ch(1, version=40)], tables)
    sink.engine.refresh(alias)
    assert sink.engine.count(alias) == 0 and stats.stale == 1
    sink.engine.delete_index(f"{alias}_v1")
