"""`bootstrap --once` ends without waiting for a Spark session still starting (a small snapshot
needs none): its JVM, the command's child, is ended rather than left to notice the exit later."""
import subprocess
import sys
import threading

from pipelines.cli.sync import SessionWarmup

# In a process of its own: this test process's own children (a test stack, a Spark session of the
# spark tier) must not be the ones it looks at.
STOP_WHILE_STARTING = r"""
import subprocess, sys, threading
from pipelines.cli.sync import SessionWarmup

release = threading.Event()
warm = SessionWarmup(cfg=None)
warm.thread = threading.Thread(target=release.wait, daemon=True)   # a start that has not ended
warm.thread.start()
sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
jvm = subprocess.Popen([*sleep, "org.apache.spark.deploy.SparkSubmit", "pyspark-shell"])
cluster = subprocess.Popen([*sleep, "org.apache.spark.deploy.master.Master"])   # not the session's
warm.stop()
ended = jvm.wait(10)
alive = cluster.poll() is None
cluster.kill()
print(ended != 0, alive)
"""


def test_a_session_still_starting_is_ended_with_its_jvm_and_nothing_else():
    done = subprocess.run([sys.executable, "-c", STOP_WHILE_STARTING], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["True", "True"], done.stderr[-2000:]


def test_a_session_that_is_up_is_stopped():
    stopped = []
    warm = SessionWarmup(cfg=None)
    warm.thread = threading.Thread(target=lambda: None)
    warm.thread.start()
    warm.thread.join()
    warm.spark = type("Spark", (), {"stop": lambda self: stopped.append(True)})()
    warm.stop()
    assert stopped == [True]


def test_a_session_not_asked_for_is_never_started_and_one_asked_for_late_starts_then():
    started = []
    warm = SessionWarmup(cfg=None)
    warm._run = lambda: started.append(True)   # a start that ends at once
    warm.thread = threading.Thread(target=lambda: warm._run())
    warm.stop()   # `--once` with a snapshot it applied itself: nothing to stop
    assert started == []
    warm.session()   # a bulk that needs Spark after all
    warm.start_now()   # asked again: still one start
    assert started == [True]
