"""Progress off a terminal is a plain line per task now and then, and one when it completes."""
import logging

from rich.console import Console

from pipelines.cli.progress_view import ProgressView


def test_plain_lines_when_the_output_is_not_a_terminal(caplog, monkeypatch):
    clock = iter(range(0, 1000, 3))
    monkeypatch.setattr("pipelines.cli.progress_view.time.monotonic", lambda: float(next(clock)))
    caplog.set_level(logging.INFO, logger="cdckit.progress")
    with ProgressView(Console(file=open("/dev/null", "w")), every_s=10) as view:
        assert not view.bars
        view.add("public.t", 1000, unit="rows")
        for done in range(100, 1001, 100):
            view.update("public.t", done)
    lines = [r.getMessage() for r in caplog.records]
    assert 2 <= len(lines) < 10  # not one per update
    assert lines[-1].startswith("public.t: 1,000/1,000 rows (100 %), ") and "rows/s" in lines[-1]
    assert "s left" in lines[0]
