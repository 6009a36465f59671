"""Exclusive file locks beside the checkpoint, shared by processes on one host."""
from __future__ import annotations

import fcntl
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An flock: released when its holder dies, so a crashed holder never blocks the others for good.
    Not reentrant: a process taking it twice waits for itself."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextmanager
def file_lock_within(path: Path, timeout_s: float, poll_s: float = 0.2) -> Iterator[bool]:
    """The lock of `file_lock` if it comes within `timeout_s`: yields True holding it, else False."""
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    with open(path, "a") as f:
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
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
