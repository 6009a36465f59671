"""The project's code as one zip Spark ships to every executor (`spark.submit.pyFiles`): on a
cluster the executors' Python has cdckit's dependencies, not necessarily cdckit itself, and never
necessarily the same version as the driver."""
from __future__ import annotations

import hashlib
import io
import os
import tempfile
import zipfile
from pathlib import Path

PACKAGES = ("connectors", "derived", "pipelines")
_BUILT: dict[str, Path] = {}


def project_root() -> Path:
    import pipelines

    return Path(pipelines.__file__).resolve().parents[1]


def _members(root: Path) -> list[tuple[str, bytes]]:
    out = []
    for package in PACKAGES:
        for folder, dirs, files in os.walk(root / package):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith((".pyc", ".pyo")):
                    continue
                path = Path(folder) / name
                out.append((path.relative_to(root).as_posix(), path.read_bytes()))
    return out


def build_archive(root: Path | None = None, into: Path | None = None) -> Path:
    """`cdckit-<hash>.zip` of the packages (named by content: an edited tree gets a new file, a
    driver never ships a half-written one). Built once per process."""
    root = root or project_root()
    key = str(root)
    if key in _BUILT and into is None:
        return _BUILT[key]
    members = _members(root)
    digest = hashlib.sha256()
    for name, data in members:
        digest.update(name.encode() + b"\0" + data)
    # A folder of this user's own (mode 0700), and a file found there used only if its bytes are the
    # ones built now: nobody else's file is shipped to the executors.
    folder = into or Path(tempfile.gettempdir()) / f"cdckit-{os.getuid()}"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / f"cdckit-{digest.hexdigest()[:16]}.zip"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    body = buf.getvalue()
    try:
        same = path.read_bytes() == body
    except OSError:
        same = False
    if not same:
        part = path.with_name(f"{path.name}.{os.getpid()}")
        part.write_bytes(body)
        os.replace(part, path)
    if into is None:
        _BUILT[key] = path
    return path

