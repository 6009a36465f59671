"""The bootstrap stops waiting for a snapshot that a failed connector task will never finish."""
from types import SimpleNamespace

import pytest

from pipelines.config import parse_config
from pipelines.errors import ConnectorFailed
from pipelines.ops.bootstrap import Watch
from tests.support.configs import BASE

TRACE = ("org.apache.kafka.connect.errors.ConnectException: An exception occurred in the change event producer.\n"
         "\tat io.debezium.pipeline.ErrorHandler.setProducerThrowable(ErrorHandler.java:67)\n"
         "Caused by: org.postgresql.util.PSQLException: ERROR: permission denied for table customers\n")


def watch_with(monkeypatch, status) -> Watch:
    monkeypatch.setattr("pipelines.ops.connector.status", lambda config: status)
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
    monkeypatch.setattr("pipelines.state.bootstrap.write_state", lambda *a: None)
    watch.finish({}, 100, "test")
    watch.on_batch(1, stats, [row])   # an incremental re-snapshot after a schema change
    assert seen == [("public.customers", 4)] and watch.reads == {"public.customers": 4}
