import socket

import requests

from pipelines.apply.stats import BatchStats
from pipelines.spark.metrics import PipelineMetrics
from tests.support.ports import free_port


def test_metrics_are_served():
    port = free_port()
    m = PipelineMetrics(port)
    m.batch(BatchStats(records=10, cache_applied=7, cache_stale=1, search_applied=6, dead_letters=2,
                       newest_source_ts_ms=1), 0.5)
    m.lags({"cdc.public.t": 42})
    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    assert 'cdckit_events_applied_total{store="cache"} 7.0' in text
    assert 'cdckit_events_stale_total{store="cache"} 1.0' in text
    assert "cdckit_dead_letters_total 2.0" in text
    assert 'cdckit_lag_records{topic="cdc.public.t"} 42.0' in text
    assert "cdckit_batch_duration_seconds_count 1.0" in text


def test_taken_port_does_not_stop_the_pipeline():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert PipelineMetrics(s.getsockname()[1]).port is None


def two_table_config():
    import copy

    from pipelines.config import parse_config
    from tests.support.configs import BASE

    data = copy.deepcopy(BASE)
    data["tables"].append({"name": "public.orders", "redis_key": "order:{id}", "key": ["id"]})
    return parse_config(data)


def row(topic, partition, records, dead=0, newest=None):
    return {"topic": topic, "partition": partition, "records": records, "dead_letters": dead,
            "newest_source_ts_ms": newest}


def test_per_table_counters_and_freshness_from_the_partition_rows():
    import time

    m = PipelineMetrics(0)
    now_ms = int(time.time() * 1000)
    rows = [row("cdc.public.customers", 0, 5, 1, now_ms - 4000), row("cdc.public.customers", 1, 3, 0, now_ms - 1000),
            row("cdc.public.orders", 0, 7, 2), row("cdc.public.cdckit_heartbeat", 0, 9, 0, now_ms)]
    m.batch(BatchStats(records=24, dead_letters=3), 0.1, rows, two_table_config())
    m.batch(BatchStats(records=2), 0.1, [row("cdc.public.orders", 1, 2)], two_table_config())
    get = m.registry.get_sample_value
    assert get("cdckit_table_records_total", {"table": "public.customers"}) == 8
    assert get("cdckit_table_records_total", {"table": "public.orders"}) == 9
    assert get("cdckit_table_dead_letters_total", {"table": "public.customers"}) == 1
    assert get("cdckit_table_dead_letters_total", {"table": "public.orders"}) == 2
    assert get("cdckit_table_records_total", {"table": "public.cdckit_heartbeat"}) is None
    assert 0.5 < get("cdckit_table_freshness_seconds", {"table": "public.customers"}) < 5  # the newest partition
    assert get("cdckit_table_freshness_seconds", {"table": "public.orders"}) is None  # no timestamp yet
    assert get("cdckit_records_total") == 26  # the totals are as before


def test_every_task_state_is_set_and_unknown_slot_bytes_are_nan():
    import math

    m = PipelineMetrics(0)
    m.connector(True, ["RUNNING", "FAILED", "RUNNING"])
    m.slot(False, None, 1024)
    get = m.registry.get_sample_value
    assert get("cdckit_connector_running") == 1
    assert {s: get("cdckit_connector_tasks", {"state": s}) for s in ("RUNNING", "FAILED", "PAUSED", "UNASSIGNED")} \
        == {"RUNNING": 2, "FAILED": 1, "PAUSED": 0, "UNASSIGNED": 0}
    assert get("cdckit_slot_active") == 0 and math.isnan(get("cdckit_slot_lag_bytes"))
    assert get("cdckit_slot_retained_bytes") == 1024


def test_snapshot_and_rebuild_gauges():
    m = PipelineMetrics(0)
    m.snapshot("public.customers", 40, 100)
    m.rebuild(True, 5, 50)
    get = m.registry.get_sample_value
    assert get("cdckit_snapshot_rows_read", {"table": "public.customers"}) == 40
    assert get("cdckit_snapshot_rows_total", {"table": "public.customers"}) == 100
    assert (get("cdckit_rebuild_active"), get("cdckit_rebuild_records_done"), get("cdckit_rebuild_records_total")) \
        == (1, 5, 50)


def test_bootstrap_watch_reports_the_snapshot_progress():
    from pipelines.bootstrap.steps import Watch

    m = PipelineMetrics(0)
    cfg = two_table_config()
    watch = Watch(cfg, {"public.customers": 10, "public.orders": 0}, metrics=m)
    get = m.registry.get_sample_value
    assert get("cdckit_snapshot_rows_read", {"table": "public.customers"}) == 0
    assert get("cdckit_snapshot_rows_total", {"table": "public.customers"}) == 10
    watch.on_batch(0, BatchStats(), [{"topic": "cdc.public.customers", "partition": 0, "fence": 7,
                                      "snapshot_reads": 4}])
    assert get("cdckit_snapshot_rows_read", {"table": "public.customers"}) == 4


def test_the_visible_endpoint_answers_200_408_and_400():
    import threading
    import time

    from pipelines.spark.metrics import PipelineMetrics, visible_answer

    m = PipelineMetrics(0)
    assert visible_answer(m, "lsn=0/10")[0].startswith("408")
    threading.Thread(target=lambda: (time.sleep(0.1), m.visible_position(0x20)), daemon=True).start()
    status, body = visible_answer(m, "lsn=0/10&store=search&timeout=5")   # waits for the publish
    assert status.startswith("200") and b'"watermark":"0/20"' in body
    m.visible_position(0x05)                                               # never back
    assert m.position == 0x20
    assert visible_answer(m, "store=cache")[0].startswith("400")
    assert visible_answer(m, "lsn=1&store=disk")[0].startswith("400")
    assert visible_answer(m, "lsn=zz")[0].startswith("400")


def test_the_visible_endpoint_refuses_a_store_the_pipeline_does_not_write():
    """#38: a cache-only pipeline answered 200 for store=search (no position is ever published there)."""
    from pipelines.spark.metrics import PipelineMetrics, visible_answer

    m = PipelineMetrics(0, sinks=("cache",))
    m.visible_position(0x20)
    assert visible_answer(m, "lsn=0/10&store=cache")[0].startswith("200")
    for store in ("search", "both"):
        status, body = visible_answer(m, f"lsn=0/10&store={store}")
        assert status.startswith("400") and b"does not write search" in body, body


def test_a_store_left_out_of_sinks_gets_no_applied_counts():
    """A store the config leaves out gets no series at all, not even zeros."""
    config = two_table_config()
    config.sinks = ["search"]
    m = PipelineMetrics(0)
    m.batch(BatchStats(records=5, search_applied=4, search_stale=1, cache_applied=4, cache_stale=1), 0.1, [], config)
    get = m.registry.get_sample_value
    assert get("cdckit_events_applied_total", {"store": "search"}) == 4
    assert get("cdckit_events_stale_total", {"store": "search"}) == 1
    assert not get("cdckit_events_applied_total", {"store": "cache"})
    assert not get("cdckit_events_stale_total", {"store": "cache"})
