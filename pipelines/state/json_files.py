"""The small JSON files cdckit keeps beside the checkpoint (status, fences, bootstrap and rebuild
state, progress): written atomically, so a reader or a crash never sees half a file."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_json(path: Path, body: Any, indent: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(body, indent=indent))
    os.replace(tmp, path)


def read_json(path: Path, default: Any = None) -> Any:
    """The file's content, or `default` when it is missing or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return default
