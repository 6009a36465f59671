"""scripts/audit: the offline equivalent of `pip-audit -r requirements.lock`.

Every package pinned in requirements.lock is checked against the vendored OSV advisories in
.ci/advisories/pypi.json (pipelines/devstack/advisories.py; scripts/refresh-advisories). A finding
(advisory id, package, version, fixed-in, summary) either is listed in .ci/audit-accepted.yaml with
its reason or fails the audit. Withdrawn advisories are skipped; advisories of one package that
alias each other (a PYSEC and the GHSA/CVE it names) are one finding. Also failing the audit:
a locked package the snapshot was not made for (refresh it) and, when the running environment has
cdckit's dependencies installed, a difference between them and the lock. An old snapshot and an
acceptance that no longer matches anything are warnings.

Exit status: 0 clean (or only accepted findings), 1 findings or lock problems, 2 unreadable input.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import yaml
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from pipelines.devstack import advisories as snapshots
from pipelines.devstack import lock as locking
from pipelines.devstack.lock import LOCK_FILE, ROOT
from pipelines.devstack.osv import UnreadableRange, affects, fixed_in

ACCEPTED_FILE = ROOT / ".ci" / "audit-accepted.yaml"
MAX_AGE_DAYS = 90
_PREFERENCE = ("PYSEC-", "GHSA-", "CVE-")


class AuditError(Exception):
    """Input the audit cannot read (exit 2)."""


@dataclass
class Finding:
    id: str
    package: str
    version: str
    fixed_in: list[str]
    summary: str
    aliases: list[str] = field(default_factory=list)
    accepted: str | None = None        # the reason, when .ci/audit-accepted.yaml accepts it

    @property
    def names(self) -> set[str]:
        return {self.id, *self.aliases}


@dataclass(frozen=True)
class Acceptance:
    id: str
    package: str
    reason: str


@dataclass
class Report:
    findings: list[Finding]
    errors: list[str]                  # failing problems other than findings
    warnings: list[str]

    @property
    def failing(self) -> list[Finding]:
        return [f for f in self.findings if f.accepted is None]

    @property
    def ok(self) -> bool:
        return not self.failing and not self.errors


def _rank(identifier: str) -> tuple[int, str]:
    for index, prefix in enumerate(_PREFERENCE):
        if identifier.startswith(prefix):
            return (index, identifier)
    return (len(_PREFERENCE), identifier)


def find(lock: dict[str, str], advisories: list[dict[str, Any]]) -> tuple[list[Finding], list[str]]:
    """The findings of the locked versions (aliases merged) and the entries that could not be read."""
    raw: list[Finding] = []
    problems: list[str] = []
    for advisory in advisories:
        if advisory.get("withdrawn"):
            continue
        for entry in advisory["affected"]:
            package = canonicalize_name(entry["package"])
            if package not in lock:
                continue
            version = lock[package]
            try:
                hit = affects(entry, version)
                fixes = fixed_in(entry, version) if hit else []
            except UnreadableRange as error:
                problems.append(f"{advisory['id']} ({package}): {error}")
                continue
            if hit:
                raw.append(Finding(advisory["id"], package, version, fixes, advisory.get("summary", ""),
                                   sorted(set(advisory.get("aliases", [])) - {advisory["id"]})))
    return merge(raw), problems


def merge(findings: list[Finding]) -> list[Finding]:
    """One finding per vulnerability and package: findings sharing any id or alias are merged
    (the PYSEC id first, then GHSA, then CVE), with every fix version and the union of aliases."""
    groups: list[list[Finding]] = []
    for finding in findings:
        joined = [g for g in groups if g[0].package == finding.package
                  and any(finding.names & other.names for other in g)]
        group = [finding] + [f for g in joined for f in g]
        groups = [g for g in groups if g not in joined] + [group]
    merged = []
    for group in groups:
        names = set().union(*(f.names for f in group))
        primary = min((f.id for f in group), key=_rank)
        first = next(f for f in group if f.id == primary)
        fixes = sorted({v for f in group for v in f.fixed_in}, key=Version)
        merged.append(Finding(primary, first.package, first.version, fixes, first.summary,
                              sorted(names - {primary}, key=_rank)))
    return sorted(merged, key=lambda f: (f.package, _rank(f.id)))


def read_accepted(path: Path) -> list[Acceptance]:
    """`.ci/audit-accepted.yaml`: `accepted:` a list of {id, package, reason}; every field required."""
    if not path.exists():
        return []
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise AuditError(f"{path}: {error}") from error
    items = data.get("accepted") if isinstance(data, dict) else None
    if items is None:
        items = []
    if not isinstance(items, list):
        raise AuditError(f"{path}: 'accepted' must be a list")
    accepted = []
    for number, item in enumerate(items, 1):
        if not isinstance(item, dict):
            raise AuditError(f"{path}: entry {number} is not a mapping")
        values = {key: str(item.get(key) or "").strip() for key in ("id", "package", "reason")}
        missing = [key for key, value in values.items() if not value]
        if missing:
            raise AuditError(f"{path}: entry {number} ({values['id'] or '?'}) has no {', '.join(missing)}")
        unknown = set(item) - {"id", "package", "reason"}
        if unknown:
            raise AuditError(f"{path}: entry {number} ({values['id']}) has unknown keys {sorted(unknown)}")
        accepted.append(Acceptance(values["id"], canonicalize_name(values["package"]), values["reason"]))
    return accepted


def apply_accepted(findings: list[Finding], accepted: list[Acceptance]) -> list[str]:
    """Mark the accepted findings (an acceptance names the package and the id or any alias);
    returns a warning per acceptance that matches no finding (fixed since: remove it)."""
    used: set[Acceptance] = set()
    for finding in findings:
        for acceptance in accepted:
            if canonicalize_name(acceptance.package) == finding.package and acceptance.id in finding.names:
                finding.accepted = acceptance.reason
                used.add(acceptance)
                break
    return [f"accepted {a.id} ({a.package}) matches no finding any more: remove it from the acceptance file"
            for a in accepted if a not in used]


def snapshot_age(snapshot: dict[str, Any], now: datetime | None = None) -> int:
    date = datetime.fromisoformat(snapshot["source"]["date"].replace("Z", "+00:00"))
    if date.tzinfo is None:
        date = date.replace(tzinfo=timezone.utc)
    return ((now or datetime.now(timezone.utc)) - date).days


def audit(lock: dict[str, str], snapshot: dict[str, Any], accepted: list[Acceptance],
          max_age_days: int = MAX_AGE_DAYS, environment: dict[str, str] | None = None,
          now: datetime | None = None) -> Report:
    errors: list[str] = []
    warnings: list[str] = []
    for name, version in sorted(lock.items()):
        try:
            Version(version)
        except InvalidVersion:
            errors.append(f"requirements.lock: {name}=={version} is not a PEP 440 version")
    if errors:
        return Report([], errors, warnings)
    covered = {canonicalize_name(p) for p in snapshot["packages"]}
    uncovered = sorted(set(lock) - covered)
    if uncovered:
        errors.append("no advisories were vendored for " + ", ".join(uncovered)
                      + " (locked after the snapshot was made): run scripts/refresh-advisories")
    if environment is not None:
        drift = locking.differences(lock, environment)
        errors += drift
        if drift:
            errors.append("the venv is not what was audited: scripts/setup installs the locked versions; "
                          "after a change to pyproject.toml, scripts/lock and scripts/refresh-advisories")
    findings, problems = find(lock, snapshot["advisories"])
    errors += [f"cannot evaluate {p}" for p in problems]
    warnings += apply_accepted(findings, accepted)
    age = snapshot_age(snapshot, now)
    if age > max_age_days:
        source = snapshot["source"]
        warnings.append(f"the advisory snapshot is {age} days old (over {max_age_days}; "
                        f"{source.get('repository', '?')} {str(source.get('commit', '?'))[:12]} of "
                        f"{source['date'][:10]}): run scripts/refresh-advisories with a newer copy")
    return Report(findings, errors, warnings)


def render(report: Report, lock_size: int, snapshot: dict[str, Any]) -> str:
    source = snapshot["source"]
    lines = [f"audit: {lock_size} locked packages against {len(snapshot['advisories'])} advisories "
             f"({source.get('repository', '?')} {str(source.get('commit', '?'))[:12]} of {source['date'][:10]})"]
    for warning in report.warnings:
        lines.append(f"audit: warning: {warning}")
    for title, group in (("accepted", [f for f in report.findings if f.accepted is not None]),
                         ("NOT ACCEPTED", report.failing)):
        if not group:
            continue
        lines.append(f"audit: {len(group)} {title} finding(s):")
        for f in group:
            also = f" (also {', '.join(f.aliases)})" if f.aliases else ""
            fixed = ", ".join(f.fixed_in) or "no fixed version"
            lines.append(f"  {f.id}{also}")
            lines.append(f"    {f.package}=={f.version}, fixed in: {fixed}")
            lines.append(f"    {f.summary}")
            if f.accepted is not None:
                lines.append(f"    accepted: {f.accepted}")
    for error in report.errors:
        lines.append(f"audit: error: {error}")
    if report.failing:
        lines.append("audit: raise the pin in requirements.lock to a fixed version (then scripts/setup and "
                     "the tests), or accept the finding with its reason in .ci/audit-accepted.yaml")
    lines.append("audit: " + ("ok" if report.ok else "FAILED"))
    return "\n".join(lines)


def main(argv: list[str] | None = None,
         environment: Callable[[], dict[str, str]] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/audit", description=__doc__.split("\n\n")[0])
    parser.add_argument("--lock", type=Path, default=LOCK_FILE)
    parser.add_argument("--advisories", type=Path, default=snapshots.SNAPSHOT)
    parser.add_argument("--accepted", type=Path, default=ACCEPTED_FILE)
    parser.add_argument("--max-age-days", type=int, default=MAX_AGE_DAYS,
                        help=f"warn when the snapshot is older (default {MAX_AGE_DAYS})")
    parser.add_argument("--no-environment", action="store_true",
                        help="do not compare the lock with the packages installed here")
    args = parser.parse_args(argv)
    try:
        lock = locking.read_lock(args.lock)
        snapshot = snapshots.load(args.advisories)
        accepted = read_accepted(args.accepted)
    except (OSError, locking.LockError, snapshots.SnapshotError, AuditError) as error:
        print(f"audit: {error}", file=sys.stderr)
        return 2
    installed = None
    if not args.no_environment:
        try:
            installed = (environment or locking.environment_pins)()
        except locking.LockError as error:
            print(f"audit: not comparing the lock with this environment: {error}", file=sys.stderr)
    report = audit(lock, snapshot, accepted, args.max_age_days, installed)
    print(render(report, len(lock), snapshot))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
