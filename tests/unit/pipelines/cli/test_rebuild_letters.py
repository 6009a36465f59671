"""`cdckit rebuild` ends with exit 7 when its replay dead-lettered more than it accepted, and
`--accept-dead-letters N` reaches the rebuild (in-process: main() with the rebuild's I/O replaced)."""
import json

import pytest
import yaml

from pipelines.cli.main import main
from pipelines.rebuild import phases as rebuild
from pipelines.state.rebuild_state import RebuildState, Targets
from tests.support.configs import BASE

REFUSED = {"count": 4, "by": {"bulk": 4}, "accepted": 0, "switch": False}


@pytest.fixture
def rebuild_with(monkeypatch, tmp_path):
    path = tmp_path / "cdckit.yaml"
    path.write_text(yaml.safe_dump({**BASE, "spark": {"checkpoint_dir": str(tmp_path / "ckpt")}}))
    asked = {}

    def fake_run(spark, cfg, plan, accept_dead_letters=0, **kw):
        asked["accept"] = accept_dead_letters
        return RebuildState(plan.as_json(), Targets(), "done", summary={"bulk": {"records": 9, "dead_letters": 4}},
                            dead_letters=asked["verdict"])

    monkeypatch.setattr("pipelines.ops.preflight.check_servers", lambda cfg: None)
    monkeypatch.setattr(rebuild, "make_plan", lambda cfg, store, table: rebuild.Plan("r1", ["search"], [], [], {}, {}))
    monkeypatch.setattr(rebuild, "run", fake_run)
    monkeypatch.setattr("pipelines.spark.session.spark_session", lambda cfg: None)

    def call(verdict, *args):
        asked["verdict"] = verdict
        return main(["rebuild", "search", "-c", str(path), *args])

    return call, asked


def test_a_refused_switch_exits_7_naming_the_letters_and_the_way_on(rebuild_with, capsys):
    call, asked = rebuild_with
    assert call(REFUSED, "--json") == 7
    out, err = capsys.readouterr()
    assert json.loads(out)["dead_letters"] == REFUSED and asked["accept"] == 0
    assert "rebuild r1 did not switch: 4 record(s)" in err and "`cdckit dlq list`" in err
    assert "--accept-dead-letters 4" in err


def test_accepted_letters_switch_and_exit_0_with_a_warning(rebuild_with, capsys):
    call, asked = rebuild_with
    assert call({**REFUSED, "accepted": 5, "switch": True}, "--accept-dead-letters", "5") == 0
    assert asked["accept"] == 5
    out = capsys.readouterr().out
    assert "switched with 4 dead-lettered records accepted" in out and "`cdckit dlq replay`" in out
