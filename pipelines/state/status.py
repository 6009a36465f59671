"""The status file: the pipeline's last batch (its stats, when, which process), written after
every batch, read by `status` and the rebuild (is a live pipeline running on this host?)."""
from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

from pipelines.state.checkpoint import CheckpointDir
from pipelines.state.json_files import read_json, write_json


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
