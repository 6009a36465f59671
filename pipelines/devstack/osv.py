"""Whether a PyPI version is affected by an OSV advisory's `affected` entry
(https://ossf.github.io/osv-schema/#evaluation): PEP 440 ordering from `packaging.version`, so
pre-releases sort before their release (2.0.0rc1 is below a fix in 2.0.0, and below an
introduction at 2.0.0)."""
from __future__ import annotations

from typing import Any

from packaging.version import InvalidVersion, Version


class UnreadableRange(ValueError):
    """An event version that is not PEP 440: the entry cannot be evaluated (nor silently passed)."""


def _version(text: str, what: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion as error:
        raise UnreadableRange(f"{what} {text!r} is not a PEP 440 version") from error


def _order(event: dict[str, str]) -> tuple[int, Version | None]:
    kind, value = next(iter(event.items()))
    if kind == "introduced" and value == "0":
        return (0, None)                     # "0": before every version, 0.dev0 included
    return (1, _version(value, kind))


def in_range(version: Version, events: list[dict[str, str]]) -> bool:
    """One ECOSYSTEM range: walk the events in version order; `introduced` opens, `fixed` (at or
    after) and `last_affected` (after) close; a `limit` caps the whole range."""
    vulnerable = False
    ordered = sorted(events, key=lambda e: (_order(e)[0], _order(e)[1] or Version("0")))
    for event in ordered:
        kind, value = next(iter(event.items()))
        if kind == "limit":
            continue
        bound = _order(event)[1]
        if kind == "introduced":
            if bound is None or version >= bound:
                vulnerable = True
        elif kind == "fixed":
            if version >= bound:
                vulnerable = False
        elif kind == "last_affected":
            if version > bound:
                vulnerable = False
        else:
            raise UnreadableRange(f"unknown event {kind!r}")
    for event in events:
        if "limit" in event and event["limit"] != "*" and version >= _version(event["limit"], "limit"):
            return False
    return vulnerable


def _listed(version: Version, listed: list[str]) -> bool:
    for text in listed:
        try:
            if Version(text) == version:     # 0.12.01 is 0.12.1
                return True
        except InvalidVersion:
            if text == str(version):
                return True
    return False


def affects(entry: dict[str, Any], version: str | Version) -> bool:
    """An `affected` entry affects the version when one of its ECOSYSTEM ranges includes it or its
    `versions` list names it (the two are alternatives in OSV, not a conjunction)."""
    version = version if isinstance(version, Version) else Version(version)
    for item in entry.get("ranges") or []:
        if item.get("type") in ("ECOSYSTEM", "SEMVER") and in_range(version, item.get("events") or []):
            return True
    return _listed(version, entry.get("versions") or [])


def fixed_in(entry: dict[str, Any], version: str | Version) -> list[str]:
    """The `fixed` versions above the given one: the releases that would end the finding."""
    version = version if isinstance(version, Version) else Version(version)
    fixes = {event["fixed"] for item in entry.get("ranges") or [] for event in item.get("events") or []
             if "fixed" in event}
    above = [f for f in fixes if _version(f, "fixed") > version]
    return sorted(above, key=Version)
