"""The vendored advisory snapshot `.ci/advisories/pypi.json`: the OSV advisories of the packages in
requirements.lock, taken from a git copy of https://github.com/pypa/advisory-database (the data
behind PyPI's vulnerability API, which pip-audit asks by default), so scripts/audit needs no network.

`python -m pipelines.devstack.advisories GIT_DIR` (scripts/refresh-advisories) rewrites it from
that repository's HEAD (or --rev): only the packages of the lock, only what the audit reads
(id, aliases, summary, dates, withdrawn, the PyPI `affected` entries with their ECOSYSTEM ranges
and version lists). The file records the source commit and its date; the audit warns when it is old.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

import yaml
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion

from pipelines.devstack.lock import LOCK_FILE, ROOT, read_lock
from pipelines.devstack.osv import UnreadableRange, affects

SNAPSHOT = ROOT / ".ci" / "advisories" / "pypi.json"
SOURCE = "https://github.com/pypa/advisory-database"
FORMAT = 1
_SUMMARY_CHARS = 200


class SnapshotError(Exception):
    pass


def summary_of(advisory: dict[str, Any]) -> str:
    """The advisory's summary, or else the start of its details (PYSEC entries have no summary)."""
    text = " ".join((advisory.get("summary") or advisory.get("details") or "").split())
    if len(text) <= _SUMMARY_CHARS:
        return text
    return text[:_SUMMARY_CHARS - 3].rsplit(" ", 1)[0] + "..."


def _covered(ranges: list[dict[str, Any]], version: str) -> bool:
    """Whether the ranges already include a listed version: OSV affects a version in a range *or*
    in the list, so the list keeps only what the ranges miss (most PYSEC lists just enumerate the
    ranges' releases). Unreadable versions stay listed."""
    try:
        return affects({"ranges": ranges}, version)
    except (UnreadableRange, InvalidVersion):
        return False


def _stamp(value: Any) -> str | None:
    # YAML reads an unquoted timestamp as a datetime; JSON keeps text.
    if value is None:
        return None
    if isinstance(value, datetime):
        value = value.astimezone(timezone.utc) if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return value.isoformat().replace("+00:00", "Z")
    return str(value)


def compact(advisory: dict[str, Any], packages: set[str]) -> dict[str, Any] | None:
    """What the audit needs of one OSV advisory, for the given packages only (None: none of them)."""
    affected = []
    for entry in advisory.get("affected") or []:
        package = entry.get("package") or {}
        if package.get("ecosystem") != "PyPI":
            continue
        name = canonicalize_name(package.get("name", ""))
        if name not in packages:
            continue
        ranges = [{"type": r["type"], "events": [{k: str(v) for k, v in e.items()} for e in r.get("events", [])]}
                  for r in entry.get("ranges") or [] if r.get("type") in ("ECOSYSTEM", "SEMVER")]
        item: dict[str, Any] = {"package": name}
        if ranges:
            item["ranges"] = ranges
        versions = [str(v) for v in entry.get("versions") or []]
        if ranges:
            versions = [v for v in versions if not _covered(ranges, v)]
        if versions:
            item["versions"] = versions
        affected.append(item)
    if not affected:
        return None
    out: dict[str, Any] = {"id": advisory["id"]}
    if advisory.get("aliases"):
        out["aliases"] = sorted(str(a) for a in advisory["aliases"])
    out["summary"] = summary_of(advisory)
    for key in ("published", "modified", "withdrawn"):
        if advisory.get(key) is not None:
            out[key] = _stamp(advisory[key])
    out["affected"] = affected
    return out


def _git(git_dir: Path, *args: str, data: bytes | None = None) -> bytes:
    done = subprocess.run(["git", f"--git-dir={git_dir}", *args], input=data, capture_output=True, timeout=600)
    if done.returncode:
        raise SnapshotError(f"git {' '.join(args)}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def read_advisories(git_dir: Path, rev: str, packages: set[str]) -> Iterator[dict[str, Any]]:
    """The raw OSV advisories under vulns/<package>/ for the given packages (directory names are
    matched after PEP 503 normalisation; the entries' own package names are checked in `compact`)."""
    listing = _git(git_dir, "ls-tree", "-r", "--format=%(objectname) %(path)", rev, "--", "vulns/").decode()
    blobs = []
    for line in listing.splitlines():
        sha, path = line.split(" ", 1)
        parts = path.split("/")
        if len(parts) == 3 and parts[2].endswith((".yaml", ".yml", ".json")) \
                and canonicalize_name(parts[1]) in packages:
            blobs.append((sha, path))
    if not blobs:
        return
    batch = _git(git_dir, "cat-file", "--batch", data="".join(f"{sha}\n" for sha, _ in blobs).encode())
    offset = 0
    for _, path in blobs:
        header_end = batch.index(b"\n", offset)
        size = int(batch[offset:header_end].split()[2])
        body = batch[header_end + 1:header_end + 1 + size]
        offset = header_end + 1 + size + 1
        text = body.decode()
        # BaseLoader: every scalar stays text (safe_load would read `fixed: 1.10` as the float 1.1).
        yield json.loads(text) if path.endswith(".json") else yaml.load(text, Loader=yaml.BaseLoader)


def build(git_dir: Path, packages: Iterable[str], rev: str = "HEAD") -> dict[str, Any]:
    names = {canonicalize_name(p) for p in packages}
    commit, date = _git(git_dir, "log", "-1", "--format=%H %cI", rev).decode().split()
    advisories = [c for a in read_advisories(git_dir, commit, names) if (c := compact(a, names))]
    advisories.sort(key=lambda a: a["id"])
    return {
        "_comment": "Generated by scripts/refresh-advisories; do not edit. Only the advisories of the "
                    "packages in requirements.lock (listed under 'packages'); scripts/audit reads it.",
        "format": FORMAT,
        "source": {"repository": SOURCE, "commit": commit, "date": date},
        "packages": sorted(names),
        "advisories": advisories,
    }


def dumps(snapshot: dict[str, Any]) -> str:
    """Readable and diffable: the header indented, one advisory per line."""
    head = {k: v for k, v in snapshot.items() if k != "advisories"}
    text = json.dumps(head, indent=1, sort_keys=False)[:-2]
    lines = ["  " + json.dumps(a, separators=(",", ":")) for a in snapshot["advisories"]]
    return text + ',\n "advisories": [\n' + ",\n".join(lines) + "\n ]\n}\n"


def load(path: Path = SNAPSHOT) -> dict[str, Any]:
    """The snapshot, checked for the parts the audit relies on."""
    try:
        snapshot = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise SnapshotError(f"{path}: {error}") from error
    if not isinstance(snapshot, dict) or snapshot.get("format") != FORMAT:
        raise SnapshotError(f"{path}: not an advisory snapshot of format {FORMAT}")
    for key in ("source", "packages", "advisories"):
        if key not in snapshot:
            raise SnapshotError(f"{path}: no {key!r}")
    if "date" not in snapshot["source"]:
        raise SnapshotError(f"{path}: the source has no date")
    for advisory in snapshot["advisories"]:
        if "id" not in advisory or not isinstance(advisory.get("affected"), list):
            raise SnapshotError(f"{path}: an advisory without id or affected: {str(advisory)[:120]}")
    return snapshot


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/refresh-advisories",
                                     description="Rewrite .ci/advisories/pypi.json from a git copy of "
                                                 "pypa/advisory-database (e.g. a bare clone).")
    parser.add_argument("git_dir", type=Path, help="the advisory database's git directory (.git or bare)")
    parser.add_argument("--rev", default="HEAD", help="the commit to read (default HEAD)")
    parser.add_argument("--lock", type=Path, default=LOCK_FILE)
    parser.add_argument("--out", type=Path, default=SNAPSHOT)
    args = parser.parse_args(argv)
    try:
        snapshot = build(args.git_dir, read_lock(args.lock), args.rev)
    except SnapshotError as error:
        print(f"refresh-advisories: {error}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(dumps(snapshot))
    source = snapshot["source"]
    print(f"refresh-advisories: {len(snapshot['advisories'])} advisories for {len(snapshot['packages'])} "
          f"packages from {source['repository']} {source['commit'][:12]} ({source['date']}) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
