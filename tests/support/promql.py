"""What tests/unit/compose checks the monitoring files against: the job's metric names, the metric
names a PromQL expression uses, and Debian's promtool (package prometheus, from scripts/setup)."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.compose_tools import COMPOSE_DIR

MONITORING_DIR = COMPOSE_DIR / "monitoring"
ALERTS_FILE = MONITORING_DIR / "alerts.yml"
ALERTS_TEST_FILE = MONITORING_DIR / "alerts_test.yml"
DASHBOARD_FILE = MONITORING_DIR / "grafana" / "dashboards" / "cdckit.json"

# As prometheus_client exposes them (counters with _total), from pipelines/spark/metrics.py.
JOB_METRICS = {
    "cdckit_records_total", "cdckit_events_applied_total", "cdckit_events_stale_total",
    "cdckit_dead_letters_total", "cdckit_batch_duration_seconds", "cdckit_freshness_seconds",
    "cdckit_change_visible_seconds", "cdckit_lag_records", "cdckit_last_batch_timestamp_seconds",
}
# Per table, connector, slot, snapshot and rebuild state (the poller in pipelines/spark/source_health.py).
STATUS_METRICS = {
    "cdckit_table_records_total", "cdckit_table_dead_letters_total", "cdckit_table_freshness_seconds",
    "cdckit_slot_lag_bytes", "cdckit_slot_retained_bytes", "cdckit_slot_active", "cdckit_connector_running",
    "cdckit_connector_tasks", "cdckit_snapshot_rows_read", "cdckit_snapshot_rows_total", "cdckit_rebuild_active",
    "cdckit_rebuild_records_done", "cdckit_rebuild_records_total",
}
HISTOGRAMS = {"cdckit_batch_duration_seconds", "cdckit_change_visible_seconds"}
KNOWN_METRICS = JOB_METRICS | STATUS_METRICS | {"up"}     # `up`: Prometheus' own, per scrape target

_KEYWORDS = {"and", "or", "unless", "bool", "offset", "group_left", "group_right", "inf", "nan"}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENT = re.compile(r"(?<![\w.$])[A-Za-z_:][A-Za-z0-9_:]*")


def metric_names(expr: str) -> set[str]:
    """The metrics a PromQL expression selects (histogram series mapped to their histogram):
    identifiers left once strings, label matchers, ranges and groupings are cut, minus functions
    and aggregations (followed by '(') and keywords."""
    text = _STRING.sub('""', expr)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = _GROUPING.sub("", text)
    names = set()
    for match in _IDENT.finditer(text):
        name = match.group(0)
        if name in _KEYWORDS or text[match.end():].lstrip().startswith("("):
            continue
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        names.add(base if base in HISTOGRAMS else name)
    return names


def promtool() -> str:
    found = shutil.which("promtool")
    if not found:
        pytest.skip("promtool is not installed: it comes with the Debian package prometheus "
                    "(scripts/setup installs it: apt-get install prometheus)")
    return found


def run_promtool(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([promtool(), *map(str, args)], capture_output=True, text=True, timeout=120, cwd=cwd)
