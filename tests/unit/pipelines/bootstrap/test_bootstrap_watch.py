"""The bootstrap stops waiting for a snapshot that a failed connector task will never finish."""
from types import SimpleNamespace

import pytest

from pipelines.config import parse_config
from pipelines.errors import ConnectorFailed
from pipelines.bootstrap.steps import Watch
from tests.support.configs import BASE

TRACE = ("org.apache.kafka.connect.errors.ConnectException: An exception occurred in the change event producer.\n"
         "\tat io.debezium.pipeline.ErrorHandler.setProducerThrowable(ErrorHandler.java:67)\n"
         "Caused by: org.postgresql.util.PSQLException: ERROR: permission denied for table customers\n")


def watch_with(monkeypatch, status) -> Watch:
    monkeypatch.setattr("pipelines.ops.connector_admin.status", lambda config: status)
    return Watch(parse_config(BASE), {"public.customers": 10})


def test_a_failed_task_ends_the_wait_with_its_root_cause(monkeypatch):
    st = SimpleNamespace(name="cdc-postgres", state="RUNNING",
                         tasks=[SimpleNamespace(id=0, state="FAILED", trace=TRACE)])
    with pytest.raises(ConnectorFailed) as raised:
        watch_with(monkeypatch, st).check_connector()
    text = str(raised.value)
    assert text.startswith("connector cdc-postgres task 0 FAILED during the snapshot: ")
    assert "root cause: org.postgresql.util.PSQLException: ERROR: permission denied" in text
    assert "`cdckit connector restart`" in text and raised.value.exit_code == 4


def test_running_tasks_are_left_alone(monkeypatch):
    st = SimpleNamespace(name="cdc-postgres", state="RUNNING", tasks=[SimpleNamespace(id=0, state="RUNNING", trace=None)])
    watch_with(monkeypatch, st).check_connector()


def test_reads_after_the_snapshot_is_applied_are_not_its_progress(monkeypatch):
    seen = []
    config = parse_config(BASE)
    watch = Watch(config, {"public.customers": 10}, on_progress=lambda table, n: seen.append((table, n)))
    row = {"topic": config.topic_for(config.tables[0]), "snapshot_reads": 4, "fence": 100}
    stats = SimpleNamespace(snapshot_last_lsn=None)
    watch.on_batch(0, stats, [row])
    assert seen == [("public.customers", 4)]
    monkeypatch.setattr("pipelines.state.bootstrap_state.write_state", lambda *a: None)
    watch.finish({}, 100, "test")
    watch.on_batch(1, stats, [row])   # an incremental re-snapshot after a schema change
    assert seen == [("public.customers", 4)] and watch.reads == {"public.customers": 4}


def test_dead_letters_during_the_snapshot_are_kept_with_its_watermark_and_said(monkeypatch, caplog):
    from pipelines.bootstrap import steps as bootstrap
    config = parse_config(BASE)
    written = []
    monkeypatch.setattr("pipelines.state.bootstrap_state.write_state", lambda ckpt, state: written.append(state))
    monkeypatch.setattr(bootstrap, "dead_letter_end", lambda config: 57)
    watch = Watch(config, {"public.customers": 10})
    topic = config.topic_for(config.tables[0])
    stats = SimpleNamespace(snapshot_last_lsn=None)
    watch.on_batch(0, stats, [{"topic": topic, "snapshot_reads": 4, "fence": 100, "dead_letters": 3}])
    watch.on_batch(1, stats, [{"topic": topic, "snapshot_reads": 6, "fence": 100, "dead_letters": 1}])
    with caplog.at_level("ERROR", logger="cdckit.bootstrap"):
        watch.finish({}, 100, "test")
    assert written[0].dead_letters == {"public.customers": 4} and written[0].dead_letters_end == 57
    assert "snapshot applied but NOT consistent" in caplog.text and "consistent with it (LSN" not in caplog.text
    watch.on_batch(2, stats, [{"topic": topic, "snapshot_reads": 0, "fence": 100, "dead_letters": 5}])
    assert watch.done.dead_letters == {"public.customers": 4}   # streamed letters are not the snapshot's


def test_the_snapshots_letters_name_each_table_and_the_commands():
    from pipelines.bootstrap.steps import letters_message

    text = letters_message({"public.a": 97, "public.orders": 48_884})
    assert text.startswith("the snapshot left 48,981 dead letters (public.orders 48,884, public.a 97): the stores "
                           "are not consistent with it.")
    assert "`cdckit dlq list`" in text and "`cdckit dlq replay`" in text
    assert "no `cdckit dlq replay` has settled since" in letters_message({"public.a": 1}, settled_since=True)


def test_a_rerun_refuses_until_a_replay_settled_the_snapshots_letters():
    from pipelines.bootstrap.steps import letters_unsettled
    from pipelines.state.bootstrap_state import BootstrapState

    state = BootstrapState(1.0, 1.0, 100, {}, "x", {}, {}, dead_letters={"public.a": 4}, dead_letters_end=9)
    assert letters_unsettled(state, settled=0, end_now=12)
    assert letters_unsettled(state, settled=8, end_now=12)          # the replay stopped at a failing letter
    assert not letters_unsettled(state, settled=9, end_now=12)      # later letters are not the snapshot's
    state.dead_letters_end = None                                   # not read: every letter up to now
    assert letters_unsettled(state, settled=9, end_now=12) and not letters_unsettled(state, 12, 12)
    assert not letters_unsettled(BootstrapState(1.0, 1.0, 100, {}, "x", {}, {}), 0, 12)


def test_a_snapshot_applied_without_its_final_record_is_not_said_consistent(monkeypatch, caplog):
    written = []
    monkeypatch.setattr("pipelines.state.bootstrap_state.write_state", lambda ckpt, state: written.append(state))
    Watch(parse_config(BASE), {"public.customers": 10}).finish({}, 100, "bulk apply (9 rounds)",
                                                                doubt="the final record was not read")
    assert "NOT confirmed complete" in caplog.text and "cdckit verify" in caplog.text
    assert "consistent with it" not in caplog.text and written[0].detected_by.endswith("unconfirmed")
