"""One logging setup: global options anywhere, a component per line, traces only with --debug, JSON."""
import json
import logging

from pipelines.cli.logs import JsonFormatter, TextFormatter, hoist_global_options


def test_global_options_are_taken_from_anywhere_before_a_double_dash():
    assert hoist_global_options(["run", "-c", "x.yaml", "--debug", "--log-format", "json"]) == \
        ["--debug", "--log-format", "json", "run", "-c", "x.yaml"]
    assert hoist_global_options(["--verbose", "status", "--log-format=json"]) == \
        ["--verbose", "--log-format=json", "status"]
    assert hoist_global_options(["dlq", "list", "--", "--debug"]) == ["dlq", "list", "--", "--debug"]


def record(exc: bool = False) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ValueError("bad value")
        except ValueError:
            import sys

            exc_info = sys.exc_info()
    return logging.LogRecord("cdckit.job", logging.WARNING, __file__, 1, "batch %d failed", (7,), exc_info)


def test_text_lines_name_the_component_and_hide_traces_unless_debugging():
    line = TextFormatter(tracebacks=False).format(record(exc=True))
    assert " WARNING job: batch 7 failed: ValueError: bad value" in line and "Traceback" not in line
    assert "Traceback" in TextFormatter(tracebacks=True).format(record(exc=True))


def test_json_lines_for_log_shippers():
    body = json.loads(JsonFormatter(tracebacks=False).format(record(exc=True)))
    assert body["level"] == "WARNING" and body["component"] == "job" and body["message"] == "batch 7 failed"
    assert body["error"] == "ValueError: bad value" and "trace" not in body and body["ts"].endswith("Z")
