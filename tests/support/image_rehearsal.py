"""A rehearsal of compose/Dockerfile without a Docker engine: a Debian bookworm root made by
debootstrap and stripped the way the Debian slim images are (dpkg path-excludes, no man pages or
docs), Debian's Python 3.11 standing in for python:3.11-slim's, then the Dockerfile's own
instructions (ENV, WORKDIR, COPY, RUN, USER) run in that root with chroot, and the image's
entrypoint tried as its user. Each chroot runs in a mount namespace of its own (unshare), so /proc
and /dev are mounted for that command only and nothing is left mounted on the host.

Needs root (chroot, mount) and debootstrap (scripts/setup installs it); the Debian mirror is the
host's (its apt sources). PyPI is reached as the host's pip reaches it: the project's wheel and its
dependencies are built on the host into a wheelhouse the root's pip installs from (no index)."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.stack import ROOT

DOCKERFILE = ROOT / "compose" / "Dockerfile"
BASE_IMAGE = "python:3.11-slim-bookworm"
SUITE = "bookworm"
CACHE = Path(os.environ.get("CDCKIT_REHEARSAL_CACHE", Path.home() / ".cache" / "cdckit" / "rehearsal"))
PATH = "/usr/local/python/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# What debian:bookworm-slim (the base of python:3.11-slim-bookworm) keeps out, from debuerreotype's
# slimify: dpkg never unpacks these paths, and the slim build deleted what debootstrap had put there.
SLIM_DPKG_EXCLUDES = """\
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/man/*
"""
# Packages python:3.11-slim-bookworm adds to Debian slim, plus Debian's Python 3.11 in place of the
# one that image builds from source into /usr/local.
PYTHON_STAND_IN = ["ca-certificates", "netbase", "tzdata", "python3", "python3-venv"]


class MirrorUnreachable(Exception):
    """debootstrap could not fetch from the Debian mirror: the only reason to skip the rehearsal."""


@dataclass
class Image:
    """The state the Dockerfile's instructions build up."""

    root: Path
    env: dict[str, str] = field(default_factory=lambda: {"PATH": PATH, "HOME": "/root"})
    workdir: str = "/"
    user: str = "0:0"
    entrypoint: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)


def debian_mirror() -> str:
    """The host's Debian mirror (apt sources), where the image's apt-get would fetch too."""
    for source in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        if source.is_file():
            found = re.search(r"(https?://\S+/debian)/?\s", source.read_text() + "\n")
            if found:
                return found.group(1)
    return "http://deb.debian.org/debian"


def instructions(dockerfile: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments), comments dropped and continuation lines joined."""
    out, pending = [], ""
    for line in dockerfile.read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        text = pending + line
        pending = ""
        keyword, _, args = text.strip().partition(" ")
        out.append((keyword.upper(), args.strip()))
    return out


def in_root(image: Image, command: str, user: str | None = None, env: dict[str, str] | None = None,
            timeout: float = 1800) -> subprocess.CompletedProcess:
    """`sh -c command` in the root, as `user`, with only the image's environment (and `env`)."""
    root = image.root
    environment = {**image.env, **(env or {})}
    inner = " ".join(["exec chroot", f"--userspec={user or image.user}", shlex.quote(str(root)),
                      "/usr/bin/env -i", *(shlex.quote(f"{k}={v}") for k, v in environment.items()),
                      "/bin/sh -c", shlex.quote(f"cd {shlex.quote(image.workdir)} && {command}")])
    setup = (f"mount -t proc proc {shlex.quote(str(root / 'proc'))} && "
             f"mount --rbind /dev {shlex.quote(str(root / 'dev'))} && ")
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", setup + inner],
                          capture_output=True, text=True, timeout=timeout)


def _checked(run: subprocess.CompletedProcess, what: str) -> subprocess.CompletedProcess:
    if run.returncode != 0:
        tail = "\n".join((run.stdout + run.stderr).splitlines()[-40:])
        raise AssertionError(f"{what} failed (exit {run.returncode}):\n{tail}")
    return run


def _timed(image: Image, name: str, start: float) -> None:
    image.timings[name] = round(time.monotonic() - start, 1)


# How long a built base stands in before it is built again: docker keeps a pulled base image until
# asked to pull again; a week keeps the rehearsal's base near the mirror's security updates.
BASE_MAX_AGE_S = 7 * 24 * 3600


def base_archive(mirror: str) -> Path:
    """Where the built base (the stand-in for the pulled base image) is kept, named after everything
    that shapes it: the suite, the mirror, the stand-in's packages, the slim excludes and this code."""
    import inspect

    parts = [SUITE, mirror, " ".join(PYTHON_STAND_IN), SLIM_DPKG_EXCLUDES,
             inspect.getsource(build_base), inspect.getsource(strip_like_slim)]
    key = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return CACHE / f"base-{SUITE}-{key}.tar"


def fresh_base(archive: Path, now: float | None = None) -> bool:
    """A kept base younger than BASE_MAX_AGE_S (older ones are built again, as a new pull would be)."""
    try:
        return (now if now is not None else time.time()) - archive.stat().st_mtime < BASE_MAX_AGE_S
    except FileNotFoundError:
        return False


def bootstrap_root(root: Path, image: Image) -> None:
    """The base: the kept one when fresh (tests/support/image_rehearsal.base_archive), else built and
    kept, as docker pulls a base image once: ~40 s of the rehearsal on two cores."""
    mirror = debian_mirror()
    archive = base_archive(mirror)
    start = time.monotonic()
    if fresh_base(archive):
        _checked(subprocess.run(["tar", "-xpf", str(archive), "--numeric-owner", "-C", str(root)],
                                capture_output=True, text=True, timeout=600), "unpacking the kept base")
        shutil.copy("/etc/resolv.conf", root / "etc/resolv.conf")   # this host's, as build_base takes it
        _timed(image, "kept base", start)
        return
    build_base(root, image, mirror)
    for old in CACHE.glob(f"base-{SUITE}-*.tar"):
        old.unlink()
    part = archive.with_name(f"{archive.name}.{os.getpid()}")
    try:
        _checked(subprocess.run(["tar", "-cpf", str(part), "--numeric-owner", "-C", str(root), "."],
                                capture_output=True, text=True, timeout=600), "keeping the base")
        os.replace(part, archive)   # whole or not at all: another run may read it
    finally:
        part.unlink(missing_ok=True)   # a tar that failed leaves no 300 MB part in the cache


def build_base(root: Path, image: Image, mirror: str) -> None:
    """debootstrap (minbase), stripped like the slim base, with the Python stand-in."""
    start = time.monotonic()
    (CACHE / "debs").mkdir(parents=True, exist_ok=True)
    run = subprocess.run(["debootstrap", "--variant=minbase", f"--cache-dir={CACHE / 'debs'}", SUITE,
                          str(root), mirror], capture_output=True, text=True, timeout=1800)
    if run.returncode != 0:
        log = (run.stdout + run.stderr).lower()
        if any(s in log for s in ("failed getting release", "couldn't download", "temporary failure",
                                  "connection refused", "no route to host", "could not resolve")):
            raise MirrorUnreachable(f"debootstrap cannot reach {mirror}: {run.stderr.strip()[-300:]}")
        _checked(run, "debootstrap")
    _timed(image, "debootstrap", start)
    # The image's apt sources (the release, its updates and its security archive).
    security = mirror.rsplit("/", 1)[0] + "/debian-security"
    (root / "etc/apt/sources.list").write_text(
        f"deb {mirror} {SUITE} main\ndeb {mirror} {SUITE}-updates main\ndeb {security} {SUITE}-security main\n")
    shutil.copy("/etc/resolv.conf", root / "etc/resolv.conf")
    (root / "etc/dpkg/dpkg.cfg.d").mkdir(parents=True, exist_ok=True)
    (root / "etc/dpkg/dpkg.cfg.d/docker").write_text(SLIM_DPKG_EXCLUDES)
    start = time.monotonic()
    _checked(in_root(image, "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
                            f"--no-install-recommends {' '.join(PYTHON_STAND_IN)} >/dev/null "
                            "&& python3 -m venv /usr/local/python && rm -rf /var/lib/apt/lists/*"),
             "the Python stand-in's install")
    strip_like_slim(root)
    _timed(image, "python stand-in", start)


def strip_like_slim(root: Path) -> None:
    """What the slim build deletes; after the stand-in too, so nothing it brought hides a missing folder."""
    for pattern in ("usr/share/man/*", "usr/share/groff/*", "usr/share/info/*", "usr/share/lintian/*",
                    "usr/share/linda/*"):
        for path in root.glob(pattern):
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    for path in (root / "usr/share/doc").glob("*/*"):
        if path.name != "copyright":
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()


def wheelhouse() -> Path:
    """The project's wheel and every dependency's, built on the host (PyPI as the host reaches it)."""
    folder = CACHE / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("cdckit-*.whl"):
        old.unlink()  # always this tree's code
    # setuptools and wheel build cdckit in the root; async-timeout is what redis-py needs on
    # Debian's Python 3.11.2 (python_full_version < 3.11.3), which the host's Python may not need.
    _checked(subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "-w", str(folder), str(ROOT),
                             "-c", str(ROOT / "requirements.lock"),
                             "setuptools>=77", "wheel", "async-timeout>=4.0.3"],
                            capture_output=True, text=True, timeout=3600),
             "pip wheel (the wheelhouse)")
    return folder


def run_dockerfile(image: Image, wheels: Path) -> None:
    """Every instruction of compose/Dockerfile, in order, as `docker build` would run them."""
    house = image.root / "wheelhouse"
    house.mkdir(exist_ok=True)
    for wheel in wheels.glob("*.whl"):
        try:
            os.link(wheel, house / wheel.name)   # pyspark's wheel is 450 MB: no copy on one disk
        except OSError:
            shutil.copy(wheel, house / wheel.name)
    # pip inside the root installs from the wheelhouse only: `pip install .` builds cdckit from the
    # copied sources with the setuptools and wheel found there.
    build_env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "/wheelhouse"}
    for number, (keyword, args) in enumerate(instructions(), 1):
        start = time.monotonic()
        if keyword == "FROM":
            assert args == BASE_IMAGE, f"the rehearsal stands in for {BASE_IMAGE}, not {args}"
        elif keyword == "ENV":
            image.env.update(dict(pair.split("=", 1) for pair in shlex.split(args)))
        elif keyword == "WORKDIR":
            image.workdir = args
            (image.root / args.lstrip("/")).mkdir(parents=True, exist_ok=True)
        elif keyword == "COPY":
            *sources, dest = shlex.split(args)
            target = image.root / os.path.join(image.workdir, dest).lstrip("/")
            for source in sources:
                path = ROOT / source
                if path.is_dir():
                    shutil.copytree(path, target, dirs_exist_ok=True,
                                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
                elif dest.endswith("/"):
                    target.mkdir(parents=True, exist_ok=True)
                    shutil.copy(path, target / path.name)
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(path, target)
        elif keyword == "RUN":
            _checked(in_root(image, args, env=build_env), f"Dockerfile instruction {number}: RUN {args}")
        elif keyword == "USER":
            image.user = args
        elif keyword == "ENTRYPOINT":
            image.entrypoint = json.loads(args)
        elif keyword == "CMD":
            pass
        else:
            raise AssertionError(f"the rehearsal does not know {keyword}")
        image.timings[f"{number} {keyword}"] = round(time.monotonic() - start, 1)


def as_container(image: Image, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """The entrypoint with `args`, as the image's user, with the image's environment and `env`."""
    command = " ".join(shlex.quote(a) for a in [*image.entrypoint, *args])
    return in_root(image, command, env=env, timeout=600)


def new_root() -> Path:
    """A folder for the root on disk (not the tmpfs /tmp may be): it holds a JRE and pyspark."""
    base = Path(os.environ.get("CDCKIT_REHEARSAL_DIR", "/var/tmp"))
    root = Path(tempfile.mkdtemp(prefix="cdckit-image-rehearsal-", dir=base))
    root.chmod(0o755)   # the root's `/`: mkdtemp's 0700 would lock the image's user out of everything
    return root


def remove_root(root: Path) -> None:
    mounts = Path("/proc/self/mounts").read_text()
    if f" {root}/" in mounts or f" {root} " in mounts:
        raise AssertionError(f"{root} still has mounts; not removing it")
    shutil.rmtree(root, ignore_errors=True)
