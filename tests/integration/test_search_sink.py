"""Both real search client adapters against the stack's engine."""
import uuid
from dataclasses import replace

import pytest

from derived.change import Change, Position, Version
from derived.sinks.search.engines import ElasticsearchEngine, OpenSearchEngine
from derived.sinks.search.sink import SearchSink, SearchTable
from tests.support.changes import ch

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("engine_cls", [OpenSearchEngine, ElasticsearchEngine])
def test_both_client_adapters_write_versioned(stack, engine_cls):
    sink = SearchSink(engine_cls(stack.search_url))
    alias = f"adapt{uuid.uuid4().hex[:8]}"
    table = SearchTable(alias, definition={"settings": {"number_of_replicas": 0},
                                         "mappings": {"properties": {"id": {"type": "long"}}}})
    tables = {"public.t": table}
    sink.prepare(table)
    sink.prepare(table)  # idempotent
    assert sink.engine.alias_targets(alias) == [f"{alias}_v1"]
    # The live definition read back through the alias, as `index show` and `status` compare it.
    from derived.sinks.search.definition import differences

    live = sink.engine.index_definition(alias)
    assert live["mappings"]["properties"]["id"] == {"type": "long"}
    assert differences(table.definition, live) == []
    assert differences({"settings": {"refresh_interval": "7s"}}, live) == [
        "settings index.refresh_interval: config 7s, live not set"]
    assert sink.apply([ch(1, version=20)], tables).applied == 1
    assert sink.apply([ch(1, version=10)], tables).stale == 1      # older: refused
    assert sink.apply([ch(1, "delete", version=30)], tables).applied == 1
    assert sink.apply([ch(1, version=25)], tables).stale == 1      # no resurrection
    # One request, three outcomes: the answer (filtered to status, error, index) keeps each in its place.
    refused = replace(ch(4, version=50), row={"id": "not a number"})
    mixed = sink.apply([ch(3, version=50), ch(1, version=5), refused], tables)
    assert (mixed.applied, mixed.stale, [d.position for d in mixed.dead]) == (1, 1, [refused.position])
    assert "mapper_parsing_exception" in mixed.dead[0].reason
    assert sink.apply([ch(3, "delete", version=60)], tables).applied == 1
    sink.engine.refresh(alias)
    assert sink.engine.count(alias) == 0
    # A tombstone-only delete: at the stored version (a redelivered copy of that change applies again).
    from derived.change import UNKNOWN

    assert sink.apply([ch(2, version=40)], tables).applied == 1
    forget = replace(ch(2, "delete"), version=UNKNOWN, tombstone=True)
    assert sink.apply([forget], tables).applied == 1
    assert sink.engine.versions(alias, ["2"]) == {}
    assert sink.apply([ch(2, version=39)], tables).stale == 1      # an older replay stays deleted
    assert sink.apply([replace(forget, doc_id="9")], tables).stale == 1  # nothing held
    assert sink.apply([ch(2, version=40)], tables).applied == 1    # the redelivered copy
    sink.engine.delete_index(f"{alias}_v1")


def test_indices_remember_deleted_versions_as_configured(stack):
    import requests

    sink = SearchSink(OpenSearchEngine(stack.search_url), gc_deletes_s=86_400)
    alias = f"gc{uuid.uuid4().hex[:8]}"
    sink.prepare(SearchTable(alias))
    settings = requests.get(f"{stack.search_url}/{alias}_v1/_settings", timeout=10).json()
    assert settings[f"{alias}_v1"]["settings"]["index"]["gc_deletes"] == "86400s"
    sink.engine.delete_index(f"{alias}_v1")


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
