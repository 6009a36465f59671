"""What the pipeline leaves beside Spark's checkpoint, for `status` and `bootstrap` to read:
the committed source offsets (Spark's own files) and a small per-batch status file."""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from pipelines.state.json_files import read_json, write_json


def _latest(folder: Path) -> int | None:
    ids = [int(p.name) for p in folder.glob("[0-9]*") if p.name.isdigit()]
    return max(ids) if ids else None


def committed_offsets(checkpoint_dir: Path) -> dict[str, dict[str, int]] | None:
    """Source offsets up to which the pipeline has applied everything (Spark's last commit)."""
    query = Path(checkpoint_dir) / "query"
    batch = _latest(query / "commits")
    if batch is None:
        return None
    lines = (query / "offsets" / str(batch)).read_text().splitlines()
    # v1 / metadata / one line per source
    return {t: {p: int(o) for p, o in parts.items()} for t, parts in json.loads(lines[2]).items()}


def status_path(checkpoint_dir: Path) -> Path:
    return Path(checkpoint_dir) / "cdckit-status.json"


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
