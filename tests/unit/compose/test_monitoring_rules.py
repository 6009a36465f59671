"""The alert rules (compose/monitoring/alerts.yml) pass `promtool check rules`, their promtool unit
tests pass, and those tests cover every alert both firing and quiet in a near miss."""
from __future__ import annotations

import re

import yaml

from tests.support.compose_tools import COMPOSE_DIR
from tests.support.promql import ALERTS_FILE, ALERTS_TEST_FILE, MONITORING_DIR, metric_names, run_promtool
from tests.unit.compose.test_monitoring_metrics import ALLOWED

ALERTS = {"CdckitJobDown", "CdckitFreshnessHigh", "CdckitSlotLagGrowing", "CdckitDeadLettersRising",
          "CdckitDeadLettersUnsettled", "CdckitStoreFarBelowPostgres",
          "CdckitConnectorTaskFailed", "CdckitConnectorDown", "CdckitSlotInactive"}


def _rules() -> list[dict]:
    [group] = yaml.safe_load(ALERTS_FILE.read_text())["groups"]
    assert group["name"] == "cdckit"
    return group["rules"]


def _rule_tests() -> list[dict]:
    return [case for test in yaml.safe_load(ALERTS_TEST_FILE.read_text())["tests"]
            for case in test.get("alert_rule_test", [])]


def test_the_rules_pass_promtool_check():
    run = run_promtool("check", "rules", ALERTS_FILE)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in run.stdout


def test_the_rules_unit_tests_pass():
    run = run_promtool("test", "rules", ALERTS_TEST_FILE.name, cwd=MONITORING_DIR)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS" in run.stdout


def test_every_alert_is_tested_firing_and_quiet():
    """promtool passes a test of a misspelled alert expected quiet: names are checked here."""
    names = {rule["alert"] for rule in _rules()}
    assert names == ALERTS
    assert yaml.safe_load(ALERTS_TEST_FILE.read_text())["rule_files"] == [ALERTS_FILE.name]
    cases = _rule_tests()
    assert {case["alertname"] for case in cases} == names, "a test names an alert alerts.yml lacks"
    fires = {case["alertname"] for case in cases if case.get("exp_alerts")}
    quiet = {case["alertname"] for case in cases if not case.get("exp_alerts")}
    assert fires == names, f"never tested firing: {sorted(names - fires)}"
    assert quiet == names, f"never tested quiet (a near miss): {sorted(names - quiet)}"


def test_every_alert_has_a_severity_and_says_what_to_do():
    for rule in _rules():
        assert rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]
        assert rule["annotations"]["summary"].strip(), rule["alert"]
        # A cdckit command to run, in backquotes.
        assert re.search(r"`cdckit [a-z]", rule["annotations"]["description"]), rule["alert"]


def test_the_rules_use_the_jobs_metric_names():
    for rule in _rules():
        used = metric_names(rule["expr"])
        assert used and used <= ALLOWED, (rule["alert"], used - ALLOWED)


def test_the_alerts_keep_status_thresholds():
    """The store-count alert and `cdckit status` call a store short at the same share and size."""
    from pipelines.status_rules import SHORTFALL_MIN_ROWS, SHORTFALL_SHARE

    [rule] = [r for r in _rules() if r["alert"] == "CdckitStoreFarBelowPostgres"]
    assert f"{SHORTFALL_SHARE} * cdckit_table_rows_estimate" in rule["expr"]
    assert f"cdckit_table_rows_estimate >= {SHORTFALL_MIN_ROWS}" in rule["expr"]


def test_setup_installs_promtools_package():
    """The suite's promtool comes from Debian's prometheus package; a skip would hide its absence."""
    setup = (COMPOSE_DIR.parent / "scripts" / "setup").read_text()
    [loop] = [line for line in setup.splitlines() if line.startswith("for pkg in ")]
    assert " prometheus " in f"{loop} " and " tmux" in loop
