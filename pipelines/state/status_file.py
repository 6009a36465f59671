"""The status file: the pipeline's last batch (its stats, when, which process), written after
every batch, read by `status` and the rebuild; and the heartbeat file, rewritten every few seconds
while `cdckit run` lives, which tells a reader on any host (the checkpoint location is shared on a
cluster) whether the pipeline is running, even in a long batch or on an idle database."""
from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

from pipelines.state.checkpoint import CheckpointDir, read_json, write_json

HEARTBEAT_S = 2.0
# A heartbeat older than this is a pipeline gone (killed, host lost); the margin covers a stalled
# file system write and clock skew between hosts.
HEARTBEAT_STALE_S = 15.0


def status_path(checkpoint_dir: Path) -> Path:
    return CheckpointDir(checkpoint_dir).status


def write_status(checkpoint_dir: Path, batch_id: int, stats: Any, seconds: float) -> None:
    body = {"batch_id": batch_id, "finished_at": time.time(), "seconds": round(seconds, 3), "pid": os.getpid(),
            "host": socket.gethostname(),
            **{k: v for k, v in vars(stats).items() if k != "visible_ms"}}
    write_json(status_path(checkpoint_dir), body)


def claim_status(checkpoint_dir: Path) -> None:
    """A starting pipeline makes the status file name it (pid, host) before its first batch: on an
    idle database that batch may be long in coming, and `status` would judge the process that
    applied the last one (gone)."""
    body = read_status(checkpoint_dir)
    if body is not None:
        write_json(status_path(checkpoint_dir), {**body, "pid": os.getpid(), "host": socket.gethostname()})


def read_status(checkpoint_dir: Path) -> dict[str, Any] | None:
    return read_json(status_path(checkpoint_dir))


def process_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Heartbeat:
    """`with Heartbeat(checkpoint_dir):` the heartbeat file says this process runs the pipeline,
    rewritten every HEARTBEAT_S from a thread of its own; on a clean exit it says it stopped."""

    def __init__(self, checkpoint_dir: Path, interval_s: float = HEARTBEAT_S):
        self.path, self.interval_s = CheckpointDir(checkpoint_dir).heartbeat, interval_s
        self.started_at = time.time()
        self.paused: str | None = None   # why the pipeline waits to restart its query (see `pause`)
        self._stop = threading.Event()
        # `pause` beats from the job's thread beside this one's loop: one writer at a time (write_json
        # goes through one temporary file).
        self._writing = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="cdckit-heartbeat", daemon=True)

    def _beat(self, running: bool = True) -> None:
        try:
            with self._writing:
                write_json(self.path, {"pid": os.getpid(), "host": socket.gethostname(), "at": time.time(),
                                       "started_at": self.started_at, "running": running,
                                       **({"paused": self.paused} if self.paused and running else {})})
        except OSError:
            pass  # a full or unreachable disk: the next beat tries again; readers see it go stale

    def pause(self, reason: str | None) -> None:
        """The query failed and waits to restart (`reason`), or runs again (None); beaten at once: a
        rebuild deciding who catches its fresh generation up must not wait on a pipeline that cannot."""
        self.paused = reason
        self._beat()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._beat()

    def __enter__(self) -> "Heartbeat":
        self._beat()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        # Stopped, unless another process beats here now (a second `cdckit run` that failed at
        # once must not declare the one that runs stopped).
        beat = read_json(self.path)
        if not isinstance(beat, dict) or (beat.get("pid"), beat.get("host"), beat.get("started_at")) == (
                os.getpid(), socket.gethostname(), self.started_at):
            self._beat(running=False)


def pipeline_paused(checkpoint_dir: Path) -> str | None:
    """Why the running pipeline waits to restart its failed query (a store lost its data, a broker
    away), or None when it runs its batches (or does not run: see pipeline_running)."""
    path = CheckpointDir(checkpoint_dir).heartbeat
    beat = read_json(path)   # read once: its running and paused fields from the same beat
    if not isinstance(beat, dict) or not _beat_running(beat, path):
        return None
    return beat.get("paused") or None


def pipeline_running(checkpoint_dir: Path, now: float | None = None) -> bool | None:
    """Is a `cdckit run` on this checkpoint alive, on any host? None: no heartbeat was ever written
    (a checkpoint from before heartbeats; callers fall back to the status file's pid)."""
    path = CheckpointDir(checkpoint_dir).heartbeat
    return _beat_running(read_json(path), path, now)


def _beat_running(beat: Any, path: Path, now: float | None = None) -> bool | None:
    if not isinstance(beat, dict):
        # Missing: never written. Present but unreadable (a network file system's transient error
        # while it is replaced): unknown, so taken as running; waiting callers look again.
        return True if path.exists() else None
    if not beat.get("running"):
        return False
    if beat.get("host") == socket.gethostname() and not process_alive(beat.get("pid")):
        return False  # killed on this host: known at once, without waiting for staleness
    return (now or time.time()) - float(beat.get("at") or 0) <= HEARTBEAT_STALE_S
