"""The live view's model: a scrape parsed, rates between scrapes, fallbacks where metrics are missing."""
import time

from prometheus_client import generate_latest

from pipelines.apply.stats import BatchStats
from pipelines.ops import watch_view as w
from pipelines.spark.metrics import PipelineMetrics

TOPICS = {"public.customers": "cdc.public.customers", "public.orders": "cdc.public.orders"}

SCRAPE = """\
# TYPE cdckit_table_records counter
cdckit_table_records_total{table="public.customers"} 1000.0
cdckit_table_records_total{table="public.orders"} 50.0
cdckit_table_records_created{table="public.customers"} 1.7e+09
# TYPE cdckit_table_dead_letters counter
cdckit_table_dead_letters_total{table="public.customers"} 2.0
# TYPE cdckit_table_freshness_seconds gauge
cdckit_table_freshness_seconds{table="public.customers"} 0.8
# TYPE cdckit_lag_records gauge
cdckit_lag_records{topic="cdc.public.customers"} 12.0
# TYPE cdckit_last_batch_timestamp_seconds gauge
cdckit_last_batch_timestamp_seconds 1000.0
# TYPE cdckit_connector_running gauge
cdckit_connector_running 1.0
# TYPE cdckit_connector_tasks gauge
cdckit_connector_tasks{state="RUNNING"} 1.0
cdckit_connector_tasks{state="FAILED"} 0.0
cdckit_connector_tasks{state="PAUSED"} 0.0
cdckit_connector_tasks{state="UNASSIGNED"} 0.0
# TYPE cdckit_slot_active gauge
cdckit_slot_active 1.0
# TYPE cdckit_slot_lag_bytes gauge
cdckit_slot_lag_bytes 2048.0
# TYPE cdckit_slot_retained_bytes gauge
cdckit_slot_retained_bytes NaN
# TYPE cdckit_snapshot_rows_read gauge
cdckit_snapshot_rows_read{table="public.customers"} 250.0
cdckit_snapshot_rows_read{table="public.orders"} 10.0
# TYPE cdckit_snapshot_rows_total gauge
cdckit_snapshot_rows_total{table="public.customers"} 1000.0
cdckit_snapshot_rows_total{table="public.orders"} 10.0
# TYPE cdckit_rebuild_active gauge
cdckit_rebuild_active 0.0
"""


def later(text: str, **values) -> str:
    for old, new in values.items():
        text = text.replace(old, new)
    return text


def test_parse_and_rates_between_two_scrapes():
    first = w.parse_scrape(SCRAPE, at=10.0)
    second = w.parse_scrape(later(SCRAPE, **{"1000.0\ncdckit_table_records_total": "1400.0\ncdckit_table_records_total"}),
                            at=14.0)
    assert first.value("cdckit_table_records_total", table="public.orders") == 50
    assert w.rates(first, second, "cdckit_table_records_total", "table") == {"public.customers": 100.0,
                                                                          "public.orders": 0.0}
    assert w.rates(None, second, "cdckit_table_records_total", "table") == {}


def test_a_reset_counter_counts_from_zero():
    before = w.Scrape(0.0, {"c_total": {(("table", "t"),): 500.0}})
    after = w.Scrape(2.0, {"c_total": {(("table", "t"),): 30.0}})
    assert w.rates(before, after, "c_total", "table") == {"t": 15.0}


def test_view_from_a_scrape():
    prev = w.parse_scrape(later(SCRAPE, **{"} 1000.0\ncdckit_table_records_total": "} 900.0\ncdckit_table_records_total"}),
                          at=0.0)
    cur = w.parse_scrape(SCRAPE, at=2.0)
    fetched = w.Fetched(counts={"public.customers": {"search_docs": 990, "cache_keys": 991}},
                        kafka_lag={"public.orders": 4, "public.customers": 999})
    view = w.build_view(cur, prev, TOPICS, fetched, now=1003.0)
    customers, orders = view.tables
    assert customers == w.TableRow("public.customers", 50.0, 12, 0.8, 2, 990, 991)  # lag from the metric
    assert orders == w.TableRow("public.orders", 0.0, 4, None, 0, None, None)       # lag from Kafka
    assert view.last_batch_age_s == 3.0
    assert view.connector == w.Connector(True, {"RUNNING": 1, "FAILED": 0, "PAUSED": 0, "UNASSIGNED": 0})
    assert view.slot == w.Slot(True, 2048.0, None)  # NaN: unknown
    assert view.bars == [w.Bar("snapshot public.customers", 250, 1000)]  # orders is complete
    assert w.missing_lag(cur, TOPICS) == ["public.orders"]


def test_without_a_scrape_the_fallbacks_and_the_error_show():
    fetched = w.Fetched(error="metrics endpoint http://h:9464/metrics does not answer (ConnectionError); retrying",
                        connector=w.Connector(False, {"FAILED": 1}, "FAILED", "connect"),
                        slot=w.Slot(False, 10, 20, source="postgres"), kafka_lag={"public.customers": 7})
    view = w.build_view(None, None, TOPICS, fetched, now=0.0)
    assert [r.lag for r in view.tables] == [7, None] and view.tables[0].events_per_s is None
    assert view.connector.state == "FAILED" and view.slot.active is False and view.bars == []
    line = w.plain_line(view)
    assert line.startswith("metrics endpoint http://h:9464/metrics does not answer")
    assert "connector FAILED (1 FAILED)" in line and "slot INACTIVE, lag 10 B, retained 20 B" in line


def test_a_rebuild_bar_and_tables_only_the_metrics_name():
    cur = w.parse_scrape(later(SCRAPE, **{"cdckit_rebuild_active 0.0": "cdckit_rebuild_active 1.0\n"
                                          "cdckit_rebuild_records_done 30.0\ncdckit_rebuild_records_total 120.0"}), 1.0)
    view = w.build_view(cur, None, {"public.customers": "cdc.public.customers"}, w.Fetched(), now=1000.0)
    assert [r.table for r in view.tables] == ["public.customers", "public.orders"]
    assert view.bars[-1] == w.Bar("rebuild", 30, 120)
    assert w.bar_text(view.bars[-1]) == "rebuild 30/120 25%"


def test_the_pipelines_own_exposition_parses_into_the_view():
    """The names the pipeline serves are the names the view reads."""
    m = PipelineMetrics(0)
    cfg_rows = [{"topic": "cdc.public.customers", "partition": 0, "records": 5, "dead_letters": 1,
                 "newest_source_ts_ms": int(time.time() * 1000)}]

    class Cfg:
        sinks = ["search", "cache"]

        @staticmethod
        def table_for_topic(topic):
            return type("T", (), {"name": "public.customers"}) if topic == "cdc.public.customers" else None

    m.batch(BatchStats(records=5, dead_letters=1), 0.1, cfg_rows, Cfg)
    m.lags({"cdc.public.customers": 3})
    m.connector(True, ["RUNNING"])
    m.slot(True, 100, 200)
    m.snapshot("public.customers", 1, 4)
    m.rebuild(False)
    cur = w.parse_scrape(generate_latest(m.registry).decode(), at=1.0)
    view = w.build_view(cur, None, TOPICS, w.Fetched(), now=time.time())
    assert view.tables[0].lag == 3 and view.tables[0].dead_letters == 1 and view.tables[0].freshness_s < 5
    assert view.connector.running and view.connector.tasks["RUNNING"] == 1
    assert view.slot == w.Slot(True, 100, 200)
    assert view.bars == [w.Bar("snapshot public.customers", 1, 4)]
    assert view.last_batch_age_s < 5


def test_formatting():
    assert w.fmt_bytes(2048) == "2.0 kB" and w.fmt_bytes(None) == "?" and w.fmt_bytes(3 * 1024 ** 4) == "3,072.0 GB"
    assert w.fmt_age(0.84) == "0.8 s" and w.fmt_age(600) == "10 min" and w.fmt_age(None) == "-"
    assert w.connector_text(w.Connector(None, state="unknown (Kafka Connect: ConnectUnreachable)")) \
        == "connector unknown (Kafka Connect: ConnectUnreachable)"
