"""cdckit's files in the temporary folder: each Spark-using command's JVM log
(`cdckit-spark-<time>-<pid>.log`) and each unnamed failure's trace (`cdckit-trace-<time>-<pid>.txt`).
Every command leaves one, so a new one removes the old: those of processes that have ended, older
than KEEP_DAYS or beyond the KEEP_NEWEST newest of their kind (a running job's log stays, however old)."""
from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path

KEEP_DAYS = 7
KEEP_NEWEST = 50
_NAMED = re.compile(r"cdckit-(spark|trace)-\d{8}T\d{6}-(\d+)\.(log|txt)")


def new_file(kind: str, suffix: str, folder: Path | None = None) -> Path:
    """A path for this process's file of `kind` ("spark", "trace"), the old ones of that kind removed."""
    folder = Path(folder or tempfile.gettempdir())
    prune(folder, kind)
    return folder / f"cdckit-{kind}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.{suffix}"


def prune(folder: Path, kind: str, now: float | None = None) -> list[Path]:
    """Remove the ended processes' files of `kind` past their age or count; the paths removed."""
    now = time.time() if now is None else now
    found = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    for e in entries:
        m = _NAMED.fullmatch(e.name)
        if m is None or m.group(1) != kind:
            continue
        try:
            found.append((e.stat().st_mtime, int(m.group(2)), Path(e.path)))
        except OSError:
            continue
    found.sort(reverse=True)   # newest first
    gone = []
    for i, (mtime, pid, path) in enumerate(found):
        if (i >= KEEP_NEWEST or now - mtime > KEEP_DAYS * 86400) and not _alive(pid):
            try:
                path.unlink()
                gone.append(path)
            except OSError:   # another user's, or removed meanwhile
                pass
    return gone


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:   # another user's process
        return True
    return True
