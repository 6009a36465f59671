"""The documents' query without Spark: the records its fold's task reads from the batch's offset
ranges (as the records mode would have brought them), and the documents that task writes itself
(as `write_fn` would have received them through the JVM)."""
from decimal import Decimal

import orjson
import pandas as pd

from derived.change import Version
from pipelines.documents import documents_query
from pipelines.documents.nested_fold import DocumentOut, FoldStats
from tests.support.records import KafkaMessage

TX = "cdc.transaction"


def test_the_ranges_are_read_as_records_without_the_transactions_begin(monkeypatch):
    log = {("cdc.public.lines", 2): [KafkaMessage(5, b'{"op":"u"}'), KafkaMessage(6, None, ts=0)],
           (TX, 0): [KafkaMessage(9, b'{"status":"BEGIN","id":"t1"}'), KafkaMessage(10, b'{"status":"END","id":"t1"}')]}
    read = []

    def read_messages(conf, r):
        read.append((r.topic, r.partition, r.start, r.end))
        yield [m for m in log[(r.topic, r.partition)] if r.start <= m.offset() < r.end]

    import connectors.kafka.ranges as ranges
    import pipelines.spark.worker_context as worker_context

    monkeypatch.setattr(ranges, "read_messages", read_messages)
    monkeypatch.setattr(worker_context, "kafka_settings", lambda config_json: {})
    monkeypatch.setattr(worker_context, "worker_config", lambda config_json: type("C", (), {"transaction_topic": TX}))
    frames = [pd.DataFrame({"topic": ["cdc.public.lines", TX], "partition": [2, 0], "start": [5, 9], "end": [7, 11],
                            "document": ["orders", "orders"]})]
    rows = documents_query._range_records(b"{}", frames)
    assert read == [("cdc.public.lines", 2, 5, 7), (TX, 0, 9, 11)]
    assert rows == [
        {"key": b'{"id":1}', "value": b'{"op":"u"}', "topic": "cdc.public.lines", "partition": 2, "offset": 5,
         "timestamp": 1_700_000_000_123},
        {"key": b'{"id":1}', "value": None, "topic": "cdc.public.lines", "partition": 2, "offset": 6,
         "timestamp": None},   # a tombstone; no timestamp: as unix_millis of a null
        {"key": b'{"id":1}', "value": b'{"status":"END","id":"t1"}', "topic": TX, "partition": 0, "offset": 10,
         "timestamp": 1_700_000_000_123},
    ]


def test_the_documents_a_fold_writes_are_those_write_fn_receives():
    outs = [DocumentOut("1", {"id": 1}, {"id": 1, "total": Decimal("1.50"), "lines": [{"n": 1}]}, Version(7, 1, 70)),
            DocumentOut("2", {"id": 2}, None, Version(8, 1, 80))]
    changes, bodies = documents_query._as_written("orders", outs)
    # What the frame the fold yields otherwise becomes in write_fn (through Arrow: the same fields).
    through_jvm = []
    for i, o in enumerate(outs):
        body = None if o.doc is None else orjson.dumps(o.doc, default=str)
        through_jvm.append(documents_query._as_change(
            {"document": "orders", "doc_id": o.doc_id, "key": orjson.dumps(o.key), "body": body,
             "deleted": o.doc is None, "epoch": o.version.epoch, "kind": o.version.kind, "lsn": o.version.lsn}, i))
    assert changes == through_jvm
    assert changes[0].row == {"id": 1, "total": "1.50", "lines": [{"n": 1}]}   # as the JVM's trip left it
    assert changes[1].op == "delete" and bodies[1] is None


def test_a_fold_that_wrote_reports_its_writes_as_write_fn_does():
    written = {"documents": 2, "search_applied": 2, "search_stale": 0, "cache_applied": 1, "cache_stale": 1,
               "dead_letters": 0, "stores_s": 0.1}
    row = documents_query._stats_row("orders", FoldStats(records=5), written)
    assert row["doc_id"] is None
    got = documents_query._written_row(row["stats"])
    assert {k: got[k] for k in written} == written
    assert orjson.loads(got["fold"])[0]["records"] == 5
    assert set(got) == set(documents_query.WRITE_STATS.names)


def test_functions_made_in_the_folds_pool_carry_its_variable_and_the_context_gets_its_dict_back():
    from types import SimpleNamespace

    from pipelines.documents.documents_query import POOL_VARIABLE, _own_worker_pool

    env = {"PYTHONHASHSEED": "0"}
    sc = SimpleNamespace(environment=env)
    with _own_worker_pool(sc):
        assert sc.environment == {"PYTHONHASHSEED": "0", POOL_VARIABLE: "documents-fold"}
        assert env == {"PYTHONHASHSEED": "0"}   # replaced, not edited: another thread may be copying it
    assert sc.environment is env
