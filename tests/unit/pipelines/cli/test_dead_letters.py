"""What the human output shows of dead letters."""
import io
from types import SimpleNamespace

from rich.console import Console

from pipelines.cli import dead_letters


def test_a_reason_with_brackets_is_shown_whole(monkeypatch):
    """Search engines name fields in brackets, which rich would take for markup and drop."""
    monkeypatch.setattr(dead_letters, "out", Console(file=io.StringIO(), width=200))
    letter = SimpleNamespace(offset=3, stage="apply", as_json=lambda: {"source": "t[0]@1"},
                             reason="mapper [j.n] cannot be changed from type [long] to [double]")
    dead_letters.show_letters([letter], 10, "t.dlq")
    shown = dead_letters.out.file.getvalue()
    assert "mapper [j.n] cannot be changed from type [long] to [double]" in shown and "t[0]@1" in shown
