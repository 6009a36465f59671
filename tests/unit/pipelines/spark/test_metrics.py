import socket

import requests

from pipelines.apply.stats import BatchStats
from pipelines.spark.metrics import PipelineMetrics


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
