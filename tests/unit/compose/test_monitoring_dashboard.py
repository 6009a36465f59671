"""The Grafana dashboard (compose/monitoring/grafana/dashboards/cdckit.json): valid JSON, every
panel queries the job's metrics through the dashboard's data source variable, and every query
parses: promtool has no expression check, so each becomes a recording rule for `check rules`."""
from __future__ import annotations

import json
import re

import pytest
import yaml

from tests.support.promql import DASHBOARD_FILE, metric_names, run_promtool
from tests.unit.compose.test_monitoring_metrics import ALLOWED

# Grafana's interval variables, as a duration promtool accepts.
GRAFANA_INTERVALS = re.compile(r"\$\{?__(rate_interval|interval|range)\}?")


@pytest.fixture(scope="module")
def dashboard():
    return json.loads(DASHBOARD_FILE.read_text())


def _queries(dashboard) -> list[tuple[str, str]]:
    return [(f"{panel['title']} {target['refId']}", target["expr"])
            for panel in dashboard["panels"] for target in panel["targets"]]


def test_the_dashboard_is_grafana_json(dashboard):
    assert dashboard["schemaVersion"] >= 39 and dashboard["uid"] == "cdckit"
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    [variable] = [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"]
    assert variable["query"] == "prometheus"
    for panel in dashboard["panels"]:
        assert panel["targets"] and all(t["expr"].strip() for t in panel["targets"]), panel["title"]
        for source in (panel["datasource"], *(t["datasource"] for t in panel["targets"])):
            assert source == {"type": "prometheus", "uid": f"${{{variable['name']}}}"}, panel["title"]


def test_the_panels_cover_the_pipeline(dashboard):
    used = set().union(*(metric_names(expr) for _, expr in _queries(dashboard)))
    for metric in ("cdckit_events_applied_total", "cdckit_table_records_total", "cdckit_freshness_seconds",
                   "cdckit_change_visible_seconds", "cdckit_batch_duration_seconds", "cdckit_lag_records",
                   "cdckit_dead_letters_total", "cdckit_slot_lag_bytes", "cdckit_connector_tasks",
                   "cdckit_snapshot_rows_read", "cdckit_snapshot_rows_total",
                   # the alerts' and `cdckit status`'s two rules: unsettled letters, stores far below Postgres
                   "cdckit_table_dead_letters_pending", "cdckit_table_store_count", "cdckit_table_rows_estimate"):
        assert metric in used, metric
    exprs = " ".join(expr for _, expr in _queries(dashboard))
    assert "histogram_quantile(0.5," in exprs and "histogram_quantile(0.99," in exprs


def test_the_panels_use_the_jobs_metric_names(dashboard):
    for name, expr in _queries(dashboard):
        used = metric_names(expr)
        assert used and used <= ALLOWED, (name, used - ALLOWED)


def test_every_query_parses(dashboard, tmp_path):
    rules = [{"record": f"cdckit:panel_query:{i}", "expr": GRAFANA_INTERVALS.sub("5m", expr)}
             for i, (_, expr) in enumerate(_queries(dashboard))]
    assert not any("$" in rule["expr"] for rule in rules), "a Grafana variable promtool would not parse"
    path = tmp_path / "panels.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": rules}]}))
    run = run_promtool("check", "rules", path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"SUCCESS: {len(rules)} rules found" in run.stdout
