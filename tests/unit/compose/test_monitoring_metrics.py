"""The names the monitoring files may use are the job's own: checked against what
pipelines/spark/metrics.py exposes, and the PromQL name extraction the checks rely on."""
from __future__ import annotations

import prometheus_client

from pipelines.spark.metrics import PipelineMetrics
from tests.support.promql import KNOWN_METRICS, metric_names

# Status's two rules as metrics (pipelines/spark/store_health.py); to join STATUS_METRICS in
# tests/support/promql.py, whose owner was busy with it when they were added.
STORE_HEALTH_METRICS = {"cdckit_table_dead_letters_pending", "cdckit_table_rows_estimate", "cdckit_table_store_count"}
ALLOWED = KNOWN_METRICS | STORE_HEALTH_METRICS


def _exposed(monkeypatch) -> set[str]:
    monkeypatch.setattr(prometheus_client, "start_http_server", lambda *a, **kw: None)
    registry = PipelineMetrics(port=0).registry
    return {family.name + ("_total" if family.type == "counter" else "") for family in registry.collect()}


def test_every_metric_the_rules_and_dashboard_may_use_is_exposed(monkeypatch):
    assert ALLOWED - {"up"} <= _exposed(monkeypatch)


def test_metric_names_finds_selectors_not_functions_labels_or_variables():
    expr = ('histogram_quantile(0.99, sum by (le) (rate(cdckit_change_visible_seconds_bucket{job="x"}'
            '[$__rate_interval]))) / on (instance) group_left max(up{job="cdckit"} offset 5m) > bool 1e3')
    assert metric_names(expr) == {"cdckit_change_visible_seconds", "up"}
    assert metric_names('time() - max_over_time(cdckit_last_batch_timestamp_seconds[1h]) > 300') == \
        {"cdckit_last_batch_timestamp_seconds"}
    assert metric_names("cdckit_typo_total or nonsense") == {"cdckit_typo_total", "nonsense"}
