"""`requirements.lock`: the exact versions of every Python package cdckit installs with its extras
local, test and bench (the dependency closure of pyproject.toml). scripts/setup installs with it as
pip constraints (`-c requirements.lock`), so CI runs the versions that scripts/audit checked.

`python -m pipelines.devstack.lock` (scripts/lock) writes it from the packages installed in the
running environment (after changing pyproject.toml: scripts/setup, scripts/lock, scripts/audit).
`--check` only compares and fails on a difference (what scripts/audit does too)."""
from __future__ import annotations

import argparse
import importlib.metadata
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCK_FILE = ROOT / "requirements.lock"
PYPROJECT = ROOT / "pyproject.toml"
EXTRAS = ("local", "test", "bench")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)$")
_HEADER = """\
# The exact versions of cdckit's Python dependencies with the extras {extras} (the closure of
# pyproject.toml, on Python {python}). scripts/setup installs with `-c requirements.lock` and
# scripts/audit checks these versions against .ci/advisories/pypi.json.
# Written by scripts/lock from an installed environment; raise a pin here (then scripts/setup,
# scripts/audit, the tests) or rewrite it all with scripts/lock after changing pyproject.toml.
"""


class LockError(Exception):
    pass


def read_lock(path: Path = LOCK_FILE) -> dict[str, str]:
    """{normalised name: version}. Only `name==version` lines (and comments): a range, an extra,
    an option or a repeated name is an error, not a package silently left unaudited."""
    pins: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = _PIN.match(line)
        if not match:
            raise LockError(f"{path}:{number}: not name==version: {raw.strip()!r}")
        name = canonicalize_name(match.group(1))
        if name in pins:
            raise LockError(f"{path}:{number}: {name} is pinned twice")
        pins[name] = match.group(2)
    return pins


def format_lock(pins: dict[str, str], python: str | None = None) -> str:
    python = python or ".".join(map(str, sys.version_info[:3]))
    lines = [f"{name}=={pins[name]}" for name in sorted(pins)]
    return _HEADER.format(extras=",".join(EXTRAS), python=python) + "\n".join(lines) + "\n"


def project_requirements(pyproject: Path = PYPROJECT, extras: Iterable[str] = EXTRAS) -> tuple[str, list[Requirement]]:
    """cdckit's normalised name and its requirements with the given extras, from pyproject.toml."""
    project = tomllib.loads(pyproject.read_text())["project"]
    texts = list(project.get("dependencies", []))
    optional = project.get("optional-dependencies", {})
    for extra in extras:
        if extra not in optional:
            raise LockError(f"{pyproject} has no extra {extra!r}")
        texts += optional[extra]
    return canonicalize_name(project["name"]), [Requirement(text) for text in texts]


@dataclass(frozen=True)
class Installed:
    version: str
    requires: tuple[str, ...]


def installed_packages() -> dict[str, Installed]:
    """Every distribution of the running environment by normalised name (first on sys.path wins)."""
    found: dict[str, Installed] = {}
    for dist in importlib.metadata.distributions():
        name = canonicalize_name(dist.metadata["Name"] or "")
        if name and name not in found:
            found[name] = Installed(dist.version, tuple(dist.requires or ()))
    return found


def closure(roots: Iterable[Requirement], installed: dict[str, Installed], own_name: str = "cdckit",
            environment: dict[str, str] | None = None) -> dict[str, str]:
    """{name: installed version} of every package the roots need, transitively, with the extras
    they ask for; markers are evaluated for this interpreter (or `environment`). A needed package
    that is not installed is an error (run scripts/setup first)."""
    pins: dict[str, str] = {}
    extras_of: dict[str, set[str]] = {}
    todo: list[Requirement] = list(roots)
    missing: list[str] = []
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if name == own_name:
            continue
        asked = set(requirement.extras)
        if name in extras_of and asked <= extras_of[name]:
            continue
        extras_of.setdefault(name, set()).update(asked)
        if name not in installed:
            missing.append(str(requirement))
            continue
        package = installed[name]
        pins[name] = package.version
        for text in package.requires:
            dependency = Requirement(text)
            if dependency.marker is None or any(
                    dependency.marker.evaluate({**(environment or {}), "extra": extra})
                    for extra in {""} | extras_of[name]):
                todo.append(dependency)
    if missing:
        raise LockError("needed but not installed (run scripts/setup): " + ", ".join(sorted(set(missing))))
    return pins


def environment_pins(pyproject: Path = PYPROJECT,
                     installed: Callable[[], dict[str, Installed]] = installed_packages) -> dict[str, str]:
    own, roots = project_requirements(pyproject)
    return closure(roots, installed(), own_name=own)


def differences(lock: dict[str, str], environment: dict[str, str]) -> list[str]:
    """What the installed closure has that the lock does not say, one line each."""
    lines = []
    for name in sorted(set(lock) | set(environment)):
        want, have = lock.get(name), environment.get(name)
        if want is None:
            lines.append(f"{name}=={have} is installed for cdckit but not in the lock")
        elif have is None:
            lines.append(f"{name}=={want} is locked but cdckit no longer needs it")
        elif want != have:
            lines.append(f"{name} is locked at {want} but {have} is installed")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/lock", description=__doc__.split("\n\n")[0])
    parser.add_argument("--lock", type=Path, default=LOCK_FILE)
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 on a difference")
    args = parser.parse_args(argv)
    try:
        pins = environment_pins()
    except LockError as error:
        print(f"lock: {error}", file=sys.stderr)
        return 2
    if args.check:
        diff = differences(read_lock(args.lock), pins)
        for line in diff:
            print(f"lock: {line}")
        return 1 if diff else 0
    args.lock.write_text(format_lock(pins))
    print(f"lock: {len(pins)} packages written to {args.lock}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
