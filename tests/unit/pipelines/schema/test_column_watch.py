import pytest

from connectors.table_shape import Column
from pipelines.config import parse_config
from pipelines.errors import SchemaChangeError
from pipelines.schema.column_watch import QUIET_S, SchemaWatch
from pipelines.state.schema import SchemaState
from tests.support.configs import BASE, with_

T = "public.customers"
V1 = [Column(1, "id", "integer", False), Column(2, "name", "text", False)]


class Fake:
    def __init__(self):
        self.cols = {T: list(V1)}
        self.signals, self.mappings, self.rebuilds = [], [], []
        self.window_count = 0
        self.ended: set[str] = set()
        self.rebuild_done = False

    def columns(self, tables):
        return {t: list(self.cols.get(t, [])) for t in tables}

    def signal_resnapshot(self, table):
        self.signals.append(table)
        return f"sig{len(self.signals)}"

    def windows(self):
        return self.window_count

    def completed(self):
        return set(self.ended)

    def extend_mapping(self, table, fields):
        self.mappings.append((table, fields))

    def start_rebuild(self, stores, table):
        self.rebuilds.append((tuple(stores), table))

    def rebuild_finished(self, since):
        return self.rebuild_done


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def watch(tmp_path, fake, clock=None):
    return SchemaWatch(SchemaState(tmp_path), fake, interval_s=5, clock=clock or Clock())


def config(policy="evolve", **table):
    return parse_config(with_("tables", [{**BASE["tables"][0], "on_schema_change": policy, **table}]))


def test_first_sight_records_the_shape_and_returns_types(tmp_path):
    fake = Fake()
    assert watch(tmp_path, fake).check(config()) == {T: {"id": "integer", "name": "text"}}
    assert SchemaState(tmp_path).shapes() == {T: V1}
    assert fake.signals == fake.mappings == fake.rebuilds == []


def test_checks_are_rate_limited_but_a_restart_still_sees_a_change_made_while_down(tmp_path):
    fake, clock = Fake(), Clock()
    w = watch(tmp_path, fake, clock)
    w.check(config())
    fake.cols[T] = V1 + [Column(3, "note", "text", False)]
    clock.t = 1
    assert "note" not in w.check(config())[T]          # within the interval: the cached types
    restarted = watch(tmp_path, fake)                    # a new job process
    assert "note" in restarted.check(config())[T]
    assert fake.mappings == [(T, {"note": "text"})] and fake.signals == []


def test_a_default_drop_or_rename_re_reads_the_table_until_its_windows_go_quiet(tmp_path):
    fake, clock = Fake(), Clock()
    w = watch(tmp_path, fake, clock)
    w.check(config())
    fake.cols[T] = [Column(1, "id", "integer", False), Column(2, "full_name", "text", False),
                    Column(3, "status", "text", True)]
    clock.t = 10
    w.check(config())
    assert fake.signals == [T]
    assert fake.mappings == [(T, {"full_name": "text", "status": "text"})]
    [work] = SchemaState(tmp_path).pending()
    assert work.resnapshot == "requested" and "renamed to full_name" in work.what and "status added" in work.what
    fake.window_count = 4                                # the snapshot's chunks
    clock.t = 20
    w.check(config())
    assert SchemaState(tmp_path).pending()               # windows still moving
    clock.t = 20 + QUIET_S + 1
    w.check(config())
    assert SchemaState(tmp_path).pending() == []
    assert fake.rebuilds == []


def test_a_type_change_with_another_mapping_rebuilds_search_after_the_re_read(tmp_path):
    fake, clock = Fake(), Clock()
    w = watch(tmp_path, fake, clock)
    w.check(config())
    fake.cols[T] = [V1[0], Column(2, "name", "integer", False)]
    clock.t = 10
    w.check(config())
    assert fake.signals == [T] and fake.rebuilds == []
    fake.window_count = 2
    clock.t = 20
    w.check(config())
    clock.t = 40
    w.check(config())
    assert fake.rebuilds == [(("search",), T)]
    [work] = SchemaState(tmp_path).pending()
    assert "rebuild running" in work.line()
    fake.rebuild_done = True
    clock.t = 50
    w.check(config())
    assert SchemaState(tmp_path).pending() == []
    assert fake.rebuilds == [(("search",), T)]  # started once


def test_stop_policy_stops_once_and_leaves_the_work_for_status(tmp_path):
    fake, clock = Fake(), Clock()
    w = watch(tmp_path, fake, clock)
    w.check(config("stop"))
    fake.cols[T] = [V1[0]]
    clock.t = 10
    with pytest.raises(SchemaChangeError, match="column name dropped") as raised:
        w.check(config("stop"))
    assert "cdckit snapshot resync public.customers" in str(raised.value)
    assert fake.signals == [] and fake.mappings == []
    [work] = SchemaState(tmp_path).pending()
    assert work.stopped and "snapshot resync" in work.line()
    assert watch(tmp_path, fake).check(config("stop")) == {T: {"id": "integer"}}  # the next start goes on


def test_a_change_to_a_projected_away_column_is_ignored(tmp_path):
    fake, clock = Fake(), Clock()
    w = watch(tmp_path, fake, clock)
    w.check(config(columns=["id"]))
    fake.cols[T] = [V1[0]]
    clock.t = 10
    w.check(config(columns=["id"]))
    assert fake.signals == fake.mappings == [] and SchemaState(tmp_path).pending() == []


def test_a_config_edit_that_reshapes_documents_rebuilds_the_stores_it_concerns(tmp_path):
    fake = Fake()
    w = watch(tmp_path, fake)
    w.config_edited(config(), config(columns=["id", "name"]))
    w.config_edited(config(), config(redis_format="hash"))
    w.config_edited(config(), config(redis_ttl_s=60))  # no stored shape changes
    assert fake.rebuilds == [(("search", "cache"), T), (("cache",), T)]
    assert [p.what for p in SchemaState(tmp_path).pending()] == [f"{T}: config edit of columns",
                                                                f"{T}: config edit of redis_format"]


def test_a_config_edit_under_stop_stops_naming_the_rebuild(tmp_path):
    fake = Fake()
    with pytest.raises(SchemaChangeError, match="cdckit rebuild search --table public.customers"):
        watch(tmp_path, fake).config_edited(config("stop"), config("stop", index="renamed"))
    assert fake.rebuilds == []
    [work] = SchemaState(tmp_path).pending()
    assert work.stopped and "cdckit rebuild all --table" in work.line()


def test_a_re_read_with_no_snapshot_window_is_signalled_again_then_given_up(tmp_path):
    from pipelines.schema.column_watch import NO_WINDOW_S

    fake, clock, wall = Fake(), Clock(), Clock()
    w = SchemaWatch(SchemaState(tmp_path), fake, interval_s=5, clock=clock, wall=wall)
    w.check(config())
    fake.cols[T] = [V1[0]]                    # a drop: a re-read
    clock.t = wall.t = 10
    w.check(config())
    assert fake.signals == [T]
    clock.t = wall.t = 10 + NO_WINDOW_S + 1   # no window: once more
    w.check(config())
    assert fake.signals == [T, T] and SchemaState(tmp_path).pending()[0].resignalled
    clock.t = wall.t = 10 + NO_WINDOW_S + 50
    w.check(config())
    assert fake.signals == [T, T]              # only once
    clock.t = wall.t = 10 + 2 * NO_WINDOW_S + 1
    w.check(config())
    assert SchemaState(tmp_path).pending() == []


def test_an_index_definition_edit_rebuilds_search_numbers_rebuild_both(tmp_path):
    fake = Fake()
    w = watch(tmp_path, fake)
    w.config_edited(config(), config(search={"settings": {"refresh_interval": "5s"}}))
    w.config_edited(config(), config(search={"text": "keyword"}))
    w.config_edited(config(), config(numeric_as_number=["amount"]))
    shared = config()
    shared.search.index_settings = {"number_of_shards": 2}
    w.config_edited(config(), shared)
    assert fake.rebuilds == [(("search",), T), (("search",), T), (("search", "cache"), T), (("search",), T)]
    assert [p.what for p in SchemaState(tmp_path).pending()][-1] == f"{T}: config edit of search.index_settings"


def test_a_stop_table_is_checked_at_every_batch_not_every_interval(tmp_path):
    """A DDL and a write less than the interval after the last check: the batch holding the write
    must not be applied in the new shape (it was, with checks every 5 s)."""
    fake, clock = Fake(), Clock()
    w = watch(tmp_path, fake, clock)
    w.check(config("stop"))
    fake.cols[T] = V1 + [Column(3, "note", "text", False)]
    clock.t = 0.5                                         # well within the 5 s interval
    with pytest.raises(SchemaChangeError, match="note"):
        w.check(config("stop"))


def test_debeziums_completed_notification_ends_the_re_read_at_once(tmp_path):
    """No 10 s of quiet: the COMPLETED notification of the re-read's own signal ends it."""
    fake, clock = Fake(), Clock()
    w = watch(tmp_path, fake, clock)
    w.check(config())
    fake.cols[T] = [V1[0], Column(2, "name", "varchar(10)", False)]   # retyped: re-read, then search
    clock.t = 10
    w.check(config())
    [work] = SchemaState(tmp_path).pending()
    fake.window_count = 1
    fake.ended = {"some other signal"}
    clock.t = 16
    w.check(config())
    assert SchemaState(tmp_path).pending()[0].resnapshot == "requested"
    fake.ended = {work.signal_id}
    clock.t = 22                                          # one second after the window: far from quiet
    w.check(config())
    assert fake.rebuilds == [(("search",), T)]
