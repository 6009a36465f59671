"""Search sink behaviour that needs no server (a scripted engine)."""
import pytest

from derived.sinks.store_errors import StoreUnavailable
from derived.sinks.search.sink import SearchSink, SearchTable, refreshed_within
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


@pytest.mark.parametrize("error,path", [
    ({"type": "illegal_argument_exception",
      "reason": "mapper [meta.nested.arr] cannot be changed from type [text] to [double]"}, "meta.nested.arr"),
    ({"type": "mapper_parsing_exception", "reason": "object mapping for [meta.p] tried to parse field [p] as object, "
      "but found a concrete value"}, "meta.p"),
    ({"type": "mapper_parsing_exception", "reason": "failed to parse field [meta.r] of type [text] in document with "
      "id '4'. Preview of field's value: '{s=1}'", "caused_by": {"reason": "Can't get text on a START_OBJECT"}}, "meta.r"),
    ({"type": "illegal_argument_exception", "reason": 'Document contains at least one immense term in '
      'field="meta._value" (whose UTF8 encoding is longer than the max length 32766)'}, "meta._value"),
    ({"type": "mapper_parsing_exception", "reason": "failed to parse",
      "caused_by": {"reason": "field name cannot be an empty string"}}, None),
    ({"type": "illegal_argument_exception", "reason": "Limit of total fields [1000] has been exceeded"}, None),
])
def test_the_path_a_refusal_names(error, path):
    from derived.sinks.search.sink import refused_path

    assert refused_path({"status": 400, "error": error}) == path


def test_the_first_refusal_of_a_field_is_a_warning_naming_table_column_and_path(caplog):
    from derived.sinks.search import sink as module

    module._warned.clear()

    class Refusing(ScriptedEngine):
        def bulk(self, operations):
            self.calls.append(operations)
            error = {"type": "illegal_argument_exception",
                     "reason": "mapper [payload.nested.arr] cannot be changed from type [text] to [double]"}
            return {"items": [{"index": {"status": 400, "error": error}} for _ in operations[::2]]}

    tables = {"public.t": SearchTable("t", rename={"meta": "payload"})}
    with caplog.at_level("WARNING", logger="cdckit.search"):
        stats = SearchSink(Refusing([]), retries=0).apply([ch(1), ch(2), ch(3)], tables)
    assert len(stats.dead) == 3
    [warning] = [r.getMessage() for r in caplog.records]
    assert "public.t at column meta, path payload.nested.arr" in warning and "json: flattened" in warning


class SettingsEngine:
    """Index settings kept for the one index behind the alias, the calls recorded."""

    def __init__(self):
        self.held, self.calls = {}, []

    def put_settings(self, index, settings):
        self.calls.append(("put", index, settings))
        value = settings["index"]["refresh_interval"]
        self.held.pop("index.refresh_interval", None)
        if value is not None:
            self.held["index.refresh_interval"] = value

    def refresh(self, index):
        self.calls.append(("refresh", index))


def test_a_load_pauses_refreshes_and_its_end_restores_the_configured_interval_and_refreshes():
    engine = SettingsEngine()
    sink, table = SearchSink(engine), SearchTable("t", refresh_interval="30s")
    sink.begin_load(table)
    assert engine.held["index.refresh_interval"] == "-1"
    sink.end_load(table)
    assert engine.held["index.refresh_interval"] == "30s" and engine.calls[-1] == ("refresh", "t")
    default = SearchTable("t")   # nothing configured: the engine's default again (null)
    sink.begin_load(default)
    sink.end_load(default)
    assert "index.refresh_interval" not in engine.held


def test_an_oversized_document_is_refused_alone_and_the_rest_sent_as_serialised_once():
    import orjson

    engine = ScriptedEngine([[201, 201]])
    big = ch(2)
    big.row = {"id": 2, "text": "x" * 3000}
    stats = SearchSink(engine, retries=0, max_document_bytes=2048).apply([ch(1), big, ch(3, "delete")], TABLES)
    assert (stats.applied, len(stats.dead)) == (2, 1)
    assert "document '2' is 3," in stats.dead[0].reason and "above search.max_document_bytes (2,048)" in stats.dead[0].reason
    [sent] = engine.calls   # the action and document of 1, the delete of 3: lines serialised once, as bytes
    assert all(type(line) is bytes for line in sent)
    assert [list(orjson.loads(line)) for line in sent] == [["index"], ["id"], ["delete"]]
    assert orjson.loads(sent[1]) == {"id": 1} and orjson.loads(sent[2])["delete"]["_id"] == "3"


def test_bulk_requests_end_at_their_count_or_their_bytes_and_a_larger_write_goes_alone():
    from derived.sinks.search.sink import bulk_requests

    def writes(*sizes):
        return [(ch(i), [b"m" * 9, b"d" * (n - 11)]) for i, n in enumerate(sizes)]   # n bytes with newlines

    assert [len(r) for r in bulk_requests(writes(10, 10, 10, 10, 10), 2, 1000)] == [2, 2, 1]
    assert [len(r) for r in bulk_requests(writes(40, 40, 40, 10), 10, 100)] == [2, 2]
    assert [len(r) for r in bulk_requests(writes(500, 10, 10), 10, 100)] == [1, 2]   # above the budget: alone
    assert list(bulk_requests([], 10, 100)) == []


def test_documents_are_serialised_as_their_request_is_cut_not_the_whole_batch_first():
    serialised, at_send = [], []

    class Counting(ScriptedEngine):
        def bulk(self, operations):
            at_send.append(len(serialised))
            return super().bulk(operations)

    sink = SearchSink(Counting([[201, 201], [201, 201], [201]]), chunk=2, retries=0)
    lines = sink._lines
    sink._lines = lambda *a: serialised.append(1) or lines(*a)
    assert sink.apply([ch(i) for i in range(5)], TABLES).applied == 5
    assert at_send == [3, 5, 5]   # a request is sent once the next write shows it full: one write ahead


@pytest.mark.parametrize("interval, within", [
    (None, True), ("1s", True), ("1S", True), ("500ms", True), ("1000ms", True), ("0s", True), (" 1 s ", True),
    ("2s", False), ("30s", False), ("2m", False), ("-1", False), ("soon", False), ("", False), ("5", False)])
def test_an_index_is_near_real_time_by_its_refresh_interval(interval, within):
    assert refreshed_within(interval, 1.0) is within


def test_make_readable_refreshes_the_tables_indexes_at_once():
    class Refreshing:
        def __init__(self):
            self.refreshed = []

        def refresh(self, index):
            self.refreshed.append(index)

    engine = Refreshing()
    sink = SearchSink(engine)
    sink.make_readable([SearchTable("b"), SearchTable("a"), SearchTable("a")])
    sink.make_readable([])
    assert engine.refreshed == ["a,b"]
