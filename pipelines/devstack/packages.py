"""Locating the server binaries that come in Python and Debian packages (jars: `jars.py`)."""
from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from pipelines.devstack.versions import pinned

POSTGRES_MAJOR = pinned()["POSTGRES_MAJOR"]          # versions.env, as compose's postgres image
POSTGRES_BIN = Path(f"/usr/lib/postgresql/{POSTGRES_MAJOR}/bin")
_SETUP_HINT = "run scripts/setup"


class MissingPackage(Exception):
    def __init__(self, server: str, what: str):
        super().__init__(f"{server}: {what} is not installed ({_SETUP_HINT})")


def package_dir(module: str, server: str, pip_name: str) -> Path:
    # find_spec on the top-level name does not import it.
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise MissingPackage(server, f"the Python package {pip_name}")
    return Path(list(spec.submodule_search_locations)[0])


def osmem_binary() -> Path:
    path = package_dir("osmem_server", "search", "osmem-server") / "bin" / "osmem-server"
    if not path.exists():
        raise MissingPackage("search", f"the osmem-server binary ({path})")
    return path


def postgres_binary(name: str) -> Path:
    path = POSTGRES_BIN / name
    if not path.exists():
        raise MissingPackage("postgres", f"the Debian package postgresql-{POSTGRES_MAJOR} ({path})")
    return path


def system_binary(name: str, server: str, debian_package: str) -> Path:
    found = shutil.which(name)
    if not found:
        raise MissingPackage(server, f"the Debian package {debian_package} ({name})")
    return Path(found)


def check_major(binary: Path, server: str, pin: str, debian_package: str) -> None:
    """Refuse a Debian server whose major version is not versions.env's (the one compose runs)."""
    import subprocess

    from pipelines.devstack.versions import major

    want = pinned()[pin]
    text = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30).stdout
    found = major(text)
    if found != want:
        raise MissingPackage(server, f"{debian_package} with major version {want} (versions.env {pin}); "
                                     f"{binary} is {found or text.strip()!r}")
