"""The source poller: connector, slot and rebuild gauges from fake clients; failures never raise."""
import logging
from contextlib import contextmanager

import pytest

from connectors.connect_client import ConnectNotFound, ConnectorStatus, ConnectUnreachable, TaskState
from pipelines.spark import source_health as sh
from pipelines.spark.metrics import PipelineMetrics


class FakeConnect:
    def __init__(self, status=None, error=None):
        self._status, self.error = status, error

    def status(self, name):
        if self.error:
            raise self.error
        return self._status


def status(state, *task_states):
    return ConnectorStatus("c", state, "w", [TaskState(i, s, "w") for i, s in enumerate(task_states)])


def get(m, name, labels=None):
    return m.registry.get_sample_value(name, labels or {})


def poller(m, connector, slot=lambda: sh.SlotHealth(True, True, 10, 20), rebuild=lambda: (False, 0, 0)):
    return sh.SourcePoller(m, connector, slot, rebuild)


def test_connector_states_become_gauges():
    m = PipelineMetrics(0)
    client = FakeConnect(status("RUNNING", "RUNNING", "FAILED"))
    poller(m, lambda: sh.connector_health(client, "c")).poll()
    assert get(m, "cdckit_connector_running") == 1
    assert [get(m, "cdckit_connector_tasks", {"state": s}) for s in ("RUNNING", "FAILED", "PAUSED", "UNASSIGNED")] \
        == [1, 1, 0, 0]
    assert (get(m, "cdckit_slot_active"), get(m, "cdckit_slot_lag_bytes"), get(m, "cdckit_slot_retained_bytes")) \
        == (1, 10, 20)


def test_a_missing_connector_is_not_running():
    health = sh.connector_health(FakeConnect(error=ConnectNotFound("404", "http://c")), "c")
    assert health == sh.ConnectorHealth(False, [], "MISSING")


def test_failing_probes_never_raise_and_are_logged_once_per_kind(caplog):
    m = PipelineMetrics(0)
    m.rebuild(True, 3, 9)
    client = FakeConnect(error=ConnectUnreachable("connection refused", "http://connect:8083"))

    def broken_slot():
        raise OSError("no route to host")

    def broken_rebuild():
        raise ValueError("half-written state")

    p = poller(m, lambda: sh.connector_health(client, "c"), broken_slot, broken_rebuild)
    with caplog.at_level(logging.WARNING, logger="cdckit.source_health"):
        for _ in range(3):
            p.poll()
    assert len(caplog.records) == 3  # one per probe, not one per poll
    assert get(m, "cdckit_connector_running") == 0
    assert all(get(m, "cdckit_connector_tasks", {"state": s}) == 0 for s in ("RUNNING", "FAILED", "PAUSED",
                                                                           "UNASSIGNED"))
    assert get(m, "cdckit_slot_active") == 0
    assert get(m, "cdckit_rebuild_active") == 1  # unknown: the last reading stays
    # Recovered, then failing again: logged again.
    client.error = None
    client._status = status("RUNNING", "RUNNING")
    p.poll()
    assert get(m, "cdckit_connector_running") == 1
    client.error = ConnectUnreachable("timed out", "http://connect:8083")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="cdckit.source_health"):
        p.poll()
    # Only the recovered probe logs again; the others still fail the same way.
    assert [r.message.split(":")[0] for r in caplog.records] == ["connector metrics not updated"]


def test_slot_health_from_postgres(monkeypatch):
    from connectors import postgres

    @contextmanager
    def connect():
        yield object()

    monkeypatch.setattr(postgres, "slot_info", lambda conn, slot: postgres.SlotInfo(slot, False, 100, 400, 900))
    monkeypatch.setattr(postgres, "current_wal_lsn", lambda conn: 1000)
    assert sh.slot_health(connect, "s") == sh.SlotHealth(True, False, 600, 900)
    monkeypatch.setattr(postgres, "slot_info", lambda conn, slot: None)
    assert sh.slot_health(connect, "s") == sh.SlotHealth(False)


def test_the_poller_thread_stops():
    m = PipelineMetrics(0)
    p = poller(m, lambda: sh.ConnectorHealth(True, ["RUNNING"])).start()
    p.stop()
    assert p.stopping.is_set()


@pytest.mark.parametrize("phase,expected", [("bulk", (True, 30, 100)), ("catchup", (True, 100, 100)),
                                            ("done", (False, 0, 0))])
def test_rebuild_progress_from_its_state(tmp_path, phase, expected):
    from pipelines.state import rebuild_state as rs
    rs.save(tmp_path, rs.RebuildState({"rebuild_id": "r1", "records": 100, "end": {"cdc.public.t": {"0": 50, "1": 50}}},
                                      rs.Targets(), phase=phase))
    asked = []

    def read_progress(rebuild_id, partitions):  # the progress board's answer
        asked.append((rebuild_id, partitions))
        return {"cdc.public.t-0": {"read": 20}, "cdc.public.t-1": {"read": 10, "done": True}}

    assert rs.progress_totals(tmp_path, read_progress) == expected
    assert asked == ([("r1", [("cdc.public.t", 0), ("cdc.public.t", 1)])] if phase == "bulk" else [])
