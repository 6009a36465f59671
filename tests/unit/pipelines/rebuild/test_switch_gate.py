"""A rebuild whose replay dead-lettered records keeps the old generation (issue 37: an alias moved
onto a near-empty index with 48,981 refusals), unless the operator accepted that many; the verdict
is part of the state machine, so a crash anywhere resumes to the same end."""
import pytest

from pipelines.config import parse_config
from pipelines.rebuild import phases as rebuild
from pipelines.rebuild import switch_gate as rebuild_letters
from pipelines.state import rebuild_state
from tests.support.configs import BASE


def test_letters_are_counted_from_every_part_of_the_replay():
    summary = {"bulk": {"dead_letters": 48_900}, "catchup": {"by": "live pipeline", "dead_letters": 80,
                                                              "dual_write_dead_letters": 1},
               "documents": {"dead_letters": 2}}
    # The live pipeline's report, read at the verdict, has its later dual writes too.
    assert rebuild_letters.count_letters(summary, {"dual_write_dead_letters": 3}) == \
        {"bulk": 48_900, "catch-up": 80, "dual writes": 3, "documents": 2}
    assert rebuild_letters.count_letters({"catchup": {"by": "rebuild", "dual_write_dead_letters": 5}}) == \
        {"bulk": 0, "catch-up": 0, "dual writes": 0, "documents": 0}


def test_the_verdict_switches_only_within_what_was_accepted():
    summary = {"bulk": {"dead_letters": 3}, "catchup": {"dead_letters": 1}}
    assert rebuild_letters.verdict(summary, None, 0) == {"count": 4, "by": {"bulk": 3, "catch-up": 1},
                                                         "accepted": 0, "switch": False}
    assert rebuild_letters.verdict(summary, None, 4)["switch"]
    assert rebuild_letters.verdict({}, None, 0) == {"count": 0, "by": {}, "accepted": 0, "switch": True}


def test_the_refusal_names_the_count_the_generations_and_the_commands():
    text = rebuild_letters.refusal("ab12", {"count": 48_981, "by": {"bulk": 48_981}, "accepted": 0, "switch": False},
                                   "cdckit rebuild all -c x.yaml")
    assert text.startswith("rebuild ab12 did not switch: 48,981 record(s) of its replay were dead-lettered (bulk 48,981)")
    assert "readers keep the old generation and the fresh one was dropped" in text
    assert "`cdckit dlq list`" in text and "`cdckit rebuild all -c x.yaml --accept-dead-letters 48981`" in text
    assert rebuild_letters.accepted_note({"count": 0, "accepted": 5, "switch": True}) is None
    assert "`cdckit dlq list`" in rebuild_letters.accepted_note({"count": 2, "accepted": 5, "switch": True})


class Fakes:
    """The rebuild's I/O replaced: what it would switch, drop and replay is recorded."""

    def __init__(self, monkeypatch, bulk_letters=0, catchup_letters=0, crash_in_drop=False):
        self.calls = []
        self.crash_in_drop = crash_in_drop
        monkeypatch.setattr("pipelines.rebuild.spark_jobs.bulk",
                            lambda *a, **kw: {"records": 10, "dead_letters": bulk_letters, "fences": {}})
        monkeypatch.setattr(rebuild, "_catch_up",
                            lambda *a, **kw: {"by": "rebuild", "records": 2, "dead_letters": catchup_letters})
        monkeypatch.setattr(rebuild, "_create_generations", lambda *a: self.calls.append("create"))
        monkeypatch.setattr(rebuild, "_switch", lambda *a: self.calls.append("switch"))
        monkeypatch.setattr(rebuild, "_drop_old", lambda *a: self.calls.append("drop old") or True)
        monkeypatch.setattr(rebuild, "_drop_fresh", self.drop_fresh)
        monkeypatch.setattr(rebuild, "_live_batch", lambda *a, **kw: None)
        monkeypatch.setattr(rebuild_state, "progress_board", lambda *a: type("B", (), {"forget": lambda self: None})())

    def drop_fresh(self, *a):
        self.calls.append("drop fresh")
        if self.crash_in_drop:
            self.crash_in_drop = False
            raise KeyboardInterrupt("killed while dropping")


def plan_and_config(tmp_path):
    cfg = parse_config({**BASE, "spark": {"checkpoint_dir": str(tmp_path)}})
    plan = rebuild.Plan("r1", ["search"], ["public.customers"], ["cdc.public.customers"], {}, {})
    plan.search = {"public.customers": {"alias": "customers", "current": "customers_v1", "target": "customers_v2"}}
    return cfg, plan


def test_a_rebuild_with_dead_letters_drops_its_fresh_generation_and_keeps_the_old(monkeypatch, tmp_path):
    fakes = Fakes(monkeypatch, bulk_letters=3, catchup_letters=1)
    cfg, plan = plan_and_config(tmp_path)
    state = rebuild.run(None, cfg, plan)
    assert fakes.calls == ["create", "drop fresh"]
    assert state.phase == "done" and not state.dual_write and state.summary["fresh_generation"] == "dropped"
    assert state.dead_letters == {"count": 4, "by": {"bulk": 3, "catch-up": 1}, "accepted": 0, "switch": False}
    assert rebuild_state.load(tmp_path).dead_letters["switch"] is False


def test_accepted_letters_switch(monkeypatch, tmp_path):
    fakes = Fakes(monkeypatch, bulk_letters=3, catchup_letters=1)
    cfg, plan = plan_and_config(tmp_path)
    state = rebuild.run(None, cfg, plan, accept_dead_letters=4)
    assert fakes.calls == ["create", "switch", "drop old"]
    assert state.phase == "done" and state.dead_letters["switch"] and state.summary["old_generation"] == "dropped"


def test_a_rebuild_killed_while_dropping_its_fresh_generation_finishes_the_drop_when_rerun(monkeypatch, tmp_path):
    fakes = Fakes(monkeypatch, bulk_letters=1, crash_in_drop=True)
    cfg, plan = plan_and_config(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        rebuild.run(None, cfg, plan)
    saved = rebuild_state.load(tmp_path)
    assert saved.phase == "refused" and not saved.dual_write
    # The rerun (the same command, here accepting every letter: too late, the verdict stands) resumes it.
    resumed = rebuild.make_plan(cfg, "search", None)
    assert resumed.resumed_phase == "refused"
    state = rebuild.run(None, cfg, resumed, accept_dead_letters=100)
    assert fakes.calls == ["create", "drop fresh", "drop fresh"] and state.phase == "done"
    assert not state.dead_letters["switch"]


def test_a_rerun_after_the_switch_began_keeps_to_its_verdict(monkeypatch, tmp_path):
    """Killed mid-switch: a rerun's catch-up may meet letters the first run did not, but half the
    aliases may have moved already; it completes the switch rather than judge again."""
    cfg, plan = plan_and_config(tmp_path)
    state = rebuild_state.RebuildState(plan.as_json(), plan.targets, "catchup", started_at=1.0,
                                       summary={"bulk": {"records": 10, "dead_letters": 0, "fences": {}}},
                                       dead_letters={"count": 0, "by": {}, "accepted": 0, "switch": True})
    rebuild_state.save(tmp_path, state)
    fakes = Fakes(monkeypatch, catchup_letters=7)
    resumed = rebuild.make_plan(cfg, "search", None)
    state = rebuild.run(None, cfg, resumed)
    assert fakes.calls == ["switch", "drop old"] and state.dead_letters["switch"]


class FakeEngine:
    def __init__(self, aliases, indices):
        self.aliases, self.indices = aliases, set(indices)

    def alias_targets(self, alias):
        return self.aliases.get(alias, [])

    def index_exists(self, index):
        return index in self.indices

    def delete_index(self, index):
        self.indices.discard(index)


def test_the_fresh_generations_are_dropped_and_never_the_live_index(monkeypatch, tmp_path):
    cfg, plan = plan_and_config(tmp_path)
    engine = FakeEngine({"customers": ["customers_v1"]}, ["customers_v1", "customers_v2"])
    from derived.sinks.search.generations import SearchGenerations

    monkeypatch.setattr(rebuild, "search_generations", lambda config: SearchGenerations(engine))
    monkeypatch.setattr(rebuild, "_live_batch", lambda *a, **kw: None)
    plan.documents = {"folder": "documents-r1"}
    (tmp_path / "documents-r1").mkdir()
    rebuild._drop_fresh(cfg, plan)
    assert engine.indices == {"customers_v1"} and not (tmp_path / "documents-r1").exists()
    plan.search["public.customers"]["target"] = "customers_v1"   # were it ever the live one: refused
    with pytest.raises(rebuild.GenerationError):
        rebuild._drop_fresh(cfg, plan)


def test_the_drop_waits_on_the_writer_lock_here_and_on_the_next_batch_for_another_host(monkeypatch, tmp_path):
    """Asked once dual_write is off: the lock proves it on this host (even on an idle log); a pipeline
    elsewhere may not share the lock, so its next batch to finish after this reading does."""
    import json
    import socket

    from pipelines.state.status_file import status_path

    cfg, _ = plan_and_config(tmp_path)
    seen = []
    monkeypatch.setattr(rebuild_state, "writers_done", lambda ckpt, timeout_s: seen.append("lock") or True)
    monkeypatch.setattr(rebuild, "_await_live_batch", lambda config, batch_at: seen.append(batch_at) or True)
    monkeypatch.setattr(rebuild, "_live_batch", lambda *a, **kw: 41)
    assert rebuild._live_writes_finished(cfg) and seen == ["lock"]           # no live pipeline ever
    status_path(tmp_path).parent.mkdir(parents=True, exist_ok=True)
    status_path(tmp_path).write_text(json.dumps({"batch_id": 41, "host": socket.gethostname()}))
    assert rebuild._live_writes_finished(cfg) and seen == ["lock", "lock"]
    status_path(tmp_path).write_text(json.dumps({"batch_id": 41, "host": "another-host"}))
    assert rebuild._live_writes_finished(cfg) and seen == ["lock", "lock", 41]
