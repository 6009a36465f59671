"""A large bootstrap's indexes are not refreshed while the bulk loads them: the pause is noted in
the checkpoint first, restored at the load's end, and a crash in between is undone by the next
start from the note (pipelines/bootstrap/steps.py, pipelines/streaming/job.py)."""
from types import SimpleNamespace

from derived.sinks.search.sink import SearchTable
from pipelines.bootstrap.steps import pause_refreshes, resume_refreshes
from pipelines.state import bootstrap_state


class Search:
    def __init__(self, refuse=(), down=False):
        self.refuse, self.down, self.paused = set(refuse), down, set()

    def begin_load(self, table):
        if table.alias in self.refuse:
            raise PermissionError("settings update not allowed")
        self.paused.add(table.alias)

    def end_load(self, table):
        if self.down:
            raise ConnectionError("refused")
        self.paused.discard(table.alias)


def setup(tmp_path, search):
    config = SimpleNamespace(flat_tables=[SimpleNamespace(name="public.a"), SimpleNamespace(name="public.b")],
                             sinks=["search"], spark=SimpleNamespace(checkpoint_dir=tmp_path))
    stores = SimpleNamespace(search=search, search_tables={"public.a": SearchTable("a"), "public.b": SearchTable("b")})
    return config, stores


def test_the_pause_is_noted_before_and_forgotten_once_every_index_is_back(tmp_path):
    config, stores = setup(tmp_path, Search())
    paused = pause_refreshes(config, stores)
    assert paused == ["public.a", "public.b"] and stores.search.paused == {"a", "b"}
    assert bootstrap_state.refresh_paused(tmp_path) == ["public.a", "public.b"]
    resume_refreshes(config, stores, paused)
    assert stores.search.paused == set() and bootstrap_state.refresh_paused(tmp_path) == []


def test_a_refused_pause_only_costs_the_speed_up_and_an_engine_away_keeps_the_note(tmp_path, caplog):
    config, stores = setup(tmp_path, Search(refuse={"b"}))
    paused = pause_refreshes(config, stores)
    assert paused == ["public.a"] and "refreshes not paused" in caplog.text
    stores.search.down = True
    resume_refreshes(config, stores, paused)
    # The engine did not answer: the note stays for the next start to restore from.
    assert bootstrap_state.refresh_paused(tmp_path) == ["public.a", "public.b"]
    assert "the next `cdckit run` or `bootstrap` restores" in caplog.text


def test_a_small_load_or_no_index_pauses_nothing(tmp_path):
    config, stores = setup(tmp_path, Search())
    config.sinks = ["cache"]
    assert pause_refreshes(config, stores) == [] and bootstrap_state.refresh_paused(tmp_path) == []
