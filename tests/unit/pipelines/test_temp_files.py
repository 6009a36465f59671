"""Each command's Spark log and failure trace in the temporary folder: the old ones of ended
processes go, a running process's stays however old."""
import os
import subprocess
import time

from pipelines import temp_files


def _file(folder, kind, pid, age_days, suffix="log"):
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(time.time() - age_days * 86400))
    path = folder / f"cdckit-{kind}-{stamp}-{pid}.{suffix}"
    path.write_text("x")
    t = time.time() - age_days * 86400
    os.utime(path, (t, t))
    return path


def test_old_files_of_ended_processes_go_and_a_running_ones_stays(tmp_path):
    ended = _ended_pid()
    old = _file(tmp_path, "spark", ended, 8)
    recent = _file(tmp_path, "spark", ended, 1)
    running = _file(tmp_path, "spark", os.getppid(), 30)      # a job started a month ago, still running
    trace = _file(tmp_path, "trace", ended, 30, "txt")        # another kind: left to its own pruning
    other = tmp_path / "cdckit-spark-notes.log"
    other.write_text("x")
    assert temp_files.prune(tmp_path, "spark") == [old]
    assert recent.exists() and running.exists() and trace.exists() and other.exists()
    path = temp_files.new_file("trace", "txt", tmp_path)
    assert not trace.exists() and path.name.startswith("cdckit-trace-") and path.name.endswith(f"-{os.getpid()}.txt")


def test_beyond_the_newest_ones_the_oldest_go(tmp_path, monkeypatch):
    monkeypatch.setattr(temp_files, "KEEP_NEWEST", 3)
    pid = _ended_pid()
    files = [_file(tmp_path, "spark", pid, age / 10) for age in range(5)]   # newest first
    gone = temp_files.prune(tmp_path, "spark")
    assert sorted(gone) == sorted(files[3:]) and all(f.exists() for f in files[:3])


def _ended_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid
