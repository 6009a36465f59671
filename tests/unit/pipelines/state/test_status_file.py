import os
import time
from types import SimpleNamespace

from pipelines.state.status_file import claim_status, read_status, status_path, write_status
from pipelines.state.checkpoint import write_json


def test_a_starting_pipeline_names_itself_and_keeps_the_last_batch(tmp_path):
    claim_status(tmp_path)
    assert read_status(tmp_path) is None  # no batch yet: nothing to claim, `status` says so
    write_status(tmp_path, 7, SimpleNamespace(records=3), 0.5)
    body = read_status(tmp_path)
    write_json(status_path(tmp_path), {**body, "pid": 1, "host": "elsewhere"})  # applied by an earlier process
    claim_status(tmp_path)
    assert read_status(tmp_path) == body and body["pid"] == os.getpid() and body["batch_id"] == 7


def test_the_heartbeat_says_running_while_the_pipeline_lives_and_stopped_after(tmp_path):
    import socket
    import time

    from pipelines.state.checkpoint import CheckpointDir
    from pipelines.state.status_file import HEARTBEAT_STALE_S, Heartbeat, pipeline_running

    assert pipeline_running(tmp_path) is None  # no heartbeat ever: callers fall back to the pid
    with Heartbeat(tmp_path, interval_s=0.05):
        first = read_json_file(CheckpointDir(tmp_path).heartbeat)["at"]
        time.sleep(0.3)
        assert pipeline_running(tmp_path) is True
        assert read_json_file(CheckpointDir(tmp_path).heartbeat)["at"] > first  # rewritten, not once
    assert pipeline_running(tmp_path) is False  # a clean stop says so at once
    # Another host's pipeline: judged by the heartbeat's age alone (its pid means nothing here).
    now = time.time()
    write_json(CheckpointDir(tmp_path).heartbeat, {"pid": 1, "host": "worker-7", "at": now, "running": True})
    assert pipeline_running(tmp_path, now=now + HEARTBEAT_STALE_S - 1) is True
    assert pipeline_running(tmp_path, now=now + HEARTBEAT_STALE_S + 1) is False
    # This host, a pid that is gone (kill -9): not running, however fresh the last beat.
    write_json(CheckpointDir(tmp_path).heartbeat, {"pid": 2 ** 22 + 17, "host": socket.gethostname(), "at": now,
                                                   "running": True})
    assert pipeline_running(tmp_path, now=now) is False
    # Present but unreadable (a network file system's hiccup while it is replaced): taken as running.
    CheckpointDir(tmp_path).heartbeat.write_text("{")
    assert pipeline_running(tmp_path) is True
    # A second `cdckit run` on the checkpoint that ends at once does not declare the running one stopped.
    other = {"pid": 4242, "host": socket.gethostname(), "at": time.time(), "started_at": 1.0, "running": True}
    beat = Heartbeat(tmp_path, interval_s=60)
    beat.__enter__()
    write_json(CheckpointDir(tmp_path).heartbeat, other)
    beat.__exit__(None, None, None)
    assert read_json_file(CheckpointDir(tmp_path).heartbeat) == other


def test_a_pipeline_waiting_to_restart_its_failed_query_says_why_until_it_runs_again(tmp_path):
    from pipelines.state.status_file import Heartbeat, pipeline_paused

    assert pipeline_paused(tmp_path) is None                # no pipeline
    with Heartbeat(tmp_path, interval_s=0.05) as beat:
        assert pipeline_paused(tmp_path) is None            # running its batches
        beat.pause("search at http://x lost its data")
        assert pipeline_paused(tmp_path) == "search at http://x lost its data"   # at once, not at the next beat
        beat.pause(None)
        assert pipeline_paused(tmp_path) is None
        beat.pause("broker away")
    assert pipeline_paused(tmp_path) is None                # stopped: not a pipeline that waits


def test_a_rebuild_catches_up_itself_beside_a_pipeline_that_waits_to_restart(tmp_path, monkeypatch):
    """The live pipeline that failed on the store a rebuild restores cannot replay the catch-up before
    the switch: the rebuild does it without first waiting LIVE_STUCK_S for it."""
    from pipelines.rebuild import phases
    from pipelines.state.status_file import Heartbeat

    config = SimpleNamespace(spark=SimpleNamespace(checkpoint_dir=tmp_path))
    monkeypatch.setattr(phases, "_live_batch", lambda *a, **k: 7)
    monkeypatch.setattr(phases.rebuild_state, "live_caught_up", lambda *a: None)
    with Heartbeat(tmp_path, interval_s=60) as beat:
        beat.pause("search lost its data")
        started = time.monotonic()
        assert phases._await_live_catch_up(config, "e1", StopNever()) is None
        assert time.monotonic() - started < 2


class StopNever:
    def wait(self, seconds):
        time.sleep(seconds)
        return False


def read_json_file(path):
    import json

    return json.loads(path.read_text())
