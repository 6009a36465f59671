"""How the suite runs: tiers in order (unit, integration, drills), a stop after the first failing
tier, markers derived from the fixtures a test uses, and where the time went.

Registered by tests/conftest.py. The tiers come from the folder a test lives in; the markers from
the fixtures pytest resolved for it, so `-m "not stack"` never selects a test that needs the stack.
"""
from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from pathlib import Path

import pytest

TIERS = ("unit", "integration", "drills")


# A file the lanes of one run (tests/support/lanes.py) share: the tiers that failed in any of them.
SHARED_FAILURES = "CDCKIT_FAILED_TIERS"


def shared_failed_tiers() -> set[int]:
    path = os.environ.get(SHARED_FAILURES)
    try:
        return {int(line) for line in Path(path).read_text().split()} if path else set()
    except (OSError, ValueError):
        return set()


def tier_of_path(path: str) -> int:
    """The tier of a test file, from the folder it lives in (a node id's file part will do)."""
    parts = Path(path).parts
    return next((i for i, name in enumerate(TIERS) if name in parts), 0)


def tier_of(item: pytest.Item) -> int:
    return tier_of_path(str(item.path))


def _fixture_from_conftest(item: pytest.Item, name: str) -> bool:
    """True when `name` resolves to tests/conftest.py's fixture (a test module may define its own
    fixture of the same name, e.g. the compose tests' `stack`, the rendered compose file)."""
    defs = getattr(item, "_fixtureinfo", None)
    defs = defs.name2fixturedefs.get(name) if defs is not None else None
    if not defs:
        return False
    return Path(defs[-1].func.__code__.co_filename) == Path(__file__).resolve().parents[1] / "conftest.py"


def uses_stack(item: pytest.Item) -> bool:
    return "stack" in getattr(item, "fixturenames", ()) and _fixture_from_conftest(item, "stack")


def needs(item: pytest.Item) -> set[str]:
    """The marks a test's fixtures and folder imply: stack (the shared servers), spark (the shared
    session), integration (any server at all: every test outside tests/unit starts or uses one)."""
    marks = set()
    names = set(getattr(item, "fixturenames", ()))
    if uses_stack(item):
        marks |= {"stack", "integration"}
    if "spark" in names and _fixture_from_conftest(item, "spark"):
        marks.add("spark")
    if tier_of(item) > 0:
        marks.add("integration")
    return marks


class Tiers:
    """The pytest plugin."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.failed_tiers: set[int] = set()
        self.seconds: dict[str, float] = defaultdict(float)
        self.test_seconds: dict[str, float] = defaultdict(float)
        self.started = time.monotonic()

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session, config, items):
        for item in items:
            for mark in needs(item) - {m.name for m in item.iter_markers()}:
                item.add_marker(getattr(pytest.mark, mark))
        # Unit first (slow ones last within it), then integration, then drills; stable otherwise.
        items.sort(key=lambda it: (tier_of(it), it.get_closest_marker("slow") is not None))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        yield
        if nextitem is None or self.config.getoption("all_tiers"):
            return
        here, after = tier_of(item), tier_of(nextitem)
        if after > here and any(t <= here for t in self.failed_tiers | shared_failed_tiers()):
            item.session.shouldfail = (f"the {TIERS[here]} tier failed: {', '.join(TIERS[after:])} not run "
                                       "(scripts/test --all-tiers runs them anyway)")

    def pytest_runtest_logreport(self, report):
        self.seconds[report.nodeid.split("::", 1)[0]] += report.duration
        self.test_seconds[report.nodeid] += report.duration
        if report.failed:
            tier = tier_of_path(report.nodeid.split("::", 1)[0])
            self.failed_tiers.add(tier)
            shared = os.environ.get(SHARED_FAILURES)
            if shared:
                with open(shared, "a") as out:
                    out.write(f"{tier}\n")

    def pytest_terminal_summary(self, terminalreporter):
        if not self.seconds:  # nothing ran (--collect-only, or every test deselected)
            return
        total = time.monotonic() - self.started
        files = sorted(self.seconds.items(), key=lambda kv: -kv[1])
        tests = sorted(self.test_seconds.items(), key=lambda kv: -kv[1])
        out = os.environ.get("CDCKIT_TEST_TIMES")
        if out:  # scripts/test prints it last, after the drills' table; the file keeps every one
            Path(out).parent.mkdir(parents=True, exist_ok=True)
            Path(out).write_text(json.dumps({"files": files, "tests": tests, "total": total}))
            return
        terminalreporter.write_line(slowest_files_table(files, total, tests))


def slowest_files_table(files: list, total: float, tests: list | None = None) -> str:
    lines = ["slowest test files (setup + call + teardown, seconds):"]
    lines += [f"{seconds:8.1f}  {path}" for path, seconds in files[:15]]
    if tests:
        lines.append("slowest tests:")
        lines += [f"{seconds:8.1f}  {nodeid}" for nodeid, seconds in tests[:10]]
    lines.append(f"{total:8.1f}  total (wall clock of the pytest session)")
    return "\n".join(lines)


def merged_times(paths: list[Path]) -> tuple[list, list, list[float]]:
    """The files and tests of one or more CDCKIT_TEST_TIMES files (the lanes of tests/support/lanes.py),
    slowest first, with each file's total."""
    files, tests, totals = [], [], []
    for path in paths:
        data = json.loads(path.read_text())
        files += data["files"]
        tests += data.get("tests") or []
        totals.append(data["total"])
    return sorted(files, key=lambda kv: -kv[1]), sorted(tests, key=lambda kv: -kv[1]), totals


if __name__ == "__main__":  # scripts/test: the table CDCKIT_TEST_TIMES holds (every file and test)
    main_file = Path(os.environ["CDCKIT_TEST_TIMES"])
    lanes = sorted(main_file.parent.glob("times-lane*.json"))
    unit_file = main_file.with_name("times-unit.json")
    named = [(p, n) for p, n in [(main_file, "stack lane 1"), *[(p, f"stack lane {p.stem[10:]}") for p in lanes],
                                 (unit_file, "the unit lane")] if p.is_file()]
    files, tests, totals = merged_times([p for p, _ in named])
    table = slowest_files_table(files, max(totals), tests)
    if len(totals) > 1:  # lanes at once: the run's wall clock is the longest one
        table += "".join(f"\n{total:8.1f}  {name}" for (_, name), total in zip(named, totals))
    print(table)
