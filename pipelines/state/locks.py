"""Exclusive file locks beside the checkpoint, shared by processes on one host."""
from __future__ import annotations

import fcntl
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def file_lock(path: Path, timeout_s: float | None = None, poll_s: float = 0.2) -> Iterator[bool]:
    """An flock: released when its holder dies, so a crashed holder never blocks the others for good.
    Not reentrant: a process taking it twice waits for itself. Given `timeout_s`, it is waited for
    that long at most: yields True holding it, else False without it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    with open(path, "a") as f:
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX if deadline is None else fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(poll_s)
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
