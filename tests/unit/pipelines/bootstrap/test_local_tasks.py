"""The snapshot bulk's local worker processes: real spawned processes, tasks of this module."""
import logging
import os

import pytest

from pipelines.bootstrap.local_tasks import LocalTasks, WorkerTaskError, WorkersLost, local_cores


@pytest.mark.parametrize("master, cores", [("local", 1), ("local[4]", 4), ("local[*]", os.cpu_count()),
                                           ("local[2,3]", 2), (" local[2] ", 2), ("local[0]", 1)])
def test_a_local_masters_cores(master, cores):
    assert local_cores(master) == cores


@pytest.mark.parametrize("master", ["spark://127.0.0.1:7077", "local-cluster[2,1,1024]", "yarn", "k8s://x",
                                    "localhost", "local[x]"])
def test_other_masters_have_no_local_workers(master):
    assert local_cores(master) is None


def _pieces_with_their_worker(config_json, group, follow_s):
    logging.getLogger("cdckit.bootstrap").warning("task of %d piece(s) in a worker", len(group))
    return [{"piece": piece, "pid": os.getpid(), "config": config_json.decode(), "follow_s": follow_s}
            for piece in group]


def _dies(config_json, group, follow_s):
    os._exit(9)


class _TwoArguments(Exception):   # like ConfigError: rebuilt from its message alone, it fails
    exit_code = 2

    def __init__(self, field, message):
        super().__init__(f"at {field}: {message}")


def _fails(config_json, group, follow_s):
    if group == ["plain"]:
        raise ValueError("a plain error")
    raise _TwoArguments("search.url", "refused")


def test_groups_run_in_worker_processes_and_their_log_lines_reach_this_process(caplog):
    caplog.set_level(logging.WARNING)
    tasks = LocalTasks(2, task=_pieces_with_their_worker).warm()
    try:
        rows = tasks.run(b'{"c": 1}', [[["t", 0, 0, 10, True], ["t", 1, 0, 5, False]], [["t", 2, 0, 7, True]]], 2.5)
    finally:
        tasks.close()
    assert [r["piece"] for r in rows] == [["t", 0, 0, 10, True], ["t", 1, 0, 5, False], ["t", 2, 0, 7, True]]
    assert {r["config"] for r in rows} == {'{"c": 1}'} and {r["follow_s"] for r in rows} == {2.5}
    assert os.getpid() not in {r["pid"] for r in rows}
    lines = [r.getMessage() for r in caplog.records if r.name == "cdckit.bootstrap"]
    assert sorted(lines) == ["task of 1 piece(s) in a worker", "task of 2 piece(s) in a worker"]


def _collector(config_json, group, follow_s):
    import gc

    return [{"threshold": gc.get_threshold(), "frozen": gc.get_freeze_count(),
             "task_module": __name__ in __import__("sys").modules}]


def test_a_workers_collector_runs_rarely_with_its_modules_frozen():
    """The bulk's workers (BULK_GC_THRESHOLDS): the task's module imported at the worker's start,
    everything then frozen out of the collector's walks, its thresholds raised."""
    from pipelines.bootstrap.local_tasks import BULK_GC_THRESHOLDS

    tasks = LocalTasks(1, task=_collector)
    try:
        (row,) = tasks.run(b"{}", [[]], 0.0)
    finally:
        tasks.close()
    assert row["threshold"] == BULK_GC_THRESHOLDS and row["frozen"] > 10_000 and row["task_module"]


def test_a_worker_that_dies_fails_the_round_with_what_to_do():
    tasks = LocalTasks(1, task=_dies)
    try:
        with pytest.raises(WorkersLost, match="run `cdckit bootstrap` again"):
            tasks.run(b"{}", [[["t", 0, 0, 1, False]]], 0.0)
    finally:
        tasks.close()


def _sleeps(config_json, group, follow_s):
    import time

    time.sleep(600)


def test_workers_end_when_their_command_is_killed(tmp_path):
    """kill -9 of the command: no shutdown reaches its workers; they end by themselves."""
    import signal
    import subprocess
    import sys
    import time

    from tests.support.integration import ROOT, process_running

    script = tmp_path / "command.py"
    script.write_text(
        f"import os, sys, threading\nsys.path.insert(0, {str(ROOT)!r})\n"
        "from pipelines.bootstrap.local_tasks import LocalTasks\n"
        "from tests.unit.pipelines.bootstrap.test_local_tasks import _sleeps\n"
        "if __name__ == '__main__':\n"   # (workers are spawned: they import the main module)
        "    tasks = LocalTasks(2, task=_sleeps)\n"
        "    threading.Thread(target=tasks.run, args=(b'{}', [[1], [2]], 0.0), daemon=True).start()\n"
        "    import time; time.sleep(3)\n"
        "    print(' '.join(str(p) for p in tasks._pool._processes), flush=True)\n"
        "    time.sleep(600)\n")

    command = subprocess.Popen([sys.executable, str(script)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    workers: list[int] = []
    try:
        workers = [int(p) for p in command.stdout.readline().split()]
        assert len(workers) == 2
        command.send_signal(signal.SIGKILL)
        command.wait(10)
        deadline = time.monotonic() + 15
        alive = workers
        while alive and time.monotonic() < deadline:
            time.sleep(0.5)
            alive = [p for p in workers if process_running(p)]
        assert alive == [], f"workers {alive} outlived their killed command"
    finally:
        command.kill()
        for pid in workers:   # (when the test failed)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass



def test_a_tasks_error_reaches_the_command_as_it_is_or_as_text_with_its_exit_code():
    tasks = LocalTasks(1, task=_fails)
    try:
        with pytest.raises(ValueError, match="a plain error"):
            tasks.run(b"{}", [["plain"]], 0.0)
        with pytest.raises(WorkerTaskError, match="_TwoArguments: at search.url: refused") as caught:
            tasks.run(b"{}", [["other"]], 0.0)
        assert caught.value.exit_code == 2 and "_fails" in caught.value.trace
        assert tasks.run(b"{}", [], 0.0) == []   # the pool still works after a task's error
    finally:
        tasks.close()


def test_no_more_workers_than_cores():
    tasks = LocalTasks(64, task=_fails)
    try:
        assert tasks.processes == os.cpu_count()
    finally:
        tasks.close()
