"""`bootstrap --once` ends without waiting for a Spark session still starting (a small snapshot
needs none): its JVM, the command's child, is ended rather than left to notice the exit later."""
import subprocess
import sys
import threading

from pipelines.cli.sync import SessionWarmup


def test_a_session_still_starting_is_ended_with_its_child_process():
    release = threading.Event()
    warm = SessionWarmup(cfg=None)
    warm.thread = threading.Thread(target=release.wait, daemon=True)   # a start that has not ended
    warm.thread.start()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        warm.stop()
        assert child.wait(10) != 0   # ended by a signal
    finally:
        release.set()
        if child.poll() is None:
            child.kill()


def test_a_session_that_is_up_is_stopped():
    stopped = []
    warm = SessionWarmup(cfg=None)
    warm.thread = threading.Thread(target=lambda: None)
    warm.thread.start()
    warm.thread.join()
    warm.spark = type("Spark", (), {"stop": lambda self: stopped.append(True)})()
    warm.stop()
    assert stopped == [True]
