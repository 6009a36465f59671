"""scripts/test's whole-suite run in lanes, pytest processes at once:

- the unit lane: the Spark driver's class archive when missing (scripts/setup leaves it to this lane),
  then `tests/unit/`, its output kept in a log and printed when the run ends;
- two stack lanes: the integration and drill test files shared out between them by their measured
  seconds (`lane_weights.json`), each lane with a local stack of its own (the second on ports moved by
  `CDCKIT_TEST_PORT_SHIFT`), each running its files tier by tier. The first lane prints as it goes; the
  second's output is kept in a log and printed when the run ends.

Why: in one process the integration and drill tiers kept two cores ~75% busy (60-99% a minute,
/proc/stat over a whole run): they wait on servers, triggers and catch-ups. Two stacks fill that idle
share (each lane then runs ~1.7x slower, the machine ~93% busy). A folder of tests that share servers
of their own (`tests/integration/secure/`) is one unit of the split. A tier that fails in one stack lane
ends the later tiers in every lane (the failed tiers are shared through a file: tiers.py); a failing
unit lane interrupts the stack lanes (SIGINT: pytest's KeyboardInterrupt, fixtures torn down, the stacks
stopped), unless --all-tiers. The exit code is the first non-zero.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from tests.support.tiers import SHARED_FAILURES

ROOT = Path(__file__).resolve().parents[2]
WEIGHTS = Path(__file__).with_name("lane_weights.json")
# The second stack's ports, below Linux's ephemeral range (32768-60999), so no outgoing connection
# can hold one and the first stack's port reservation is never rewritten (processes.reserve_ports).
SECOND_STACK_SHIFT = -30000
METRICS_PORT = 9464    # cdckit's default `metrics_port`
UNKNOWN_FILE_S = 30     # a test file the weights do not know yet: about a median file's seconds
UNITS_TOGETHER = ("tests/integration/secure",)   # folders whose files share servers of their own


def unit_times_file(times: str | None) -> str | None:
    """Where the unit lane writes its times (beside the main lane's file, which tiers.py merges)."""
    return str(Path(times).with_name("times-unit.json")) if times else None


def lane_times_file(times: str | None, lane: int) -> str | None:
    return str(Path(times).with_name(f"times-lane{lane}.json")) if times and lane > 1 else times


def stack_test_files(root: Path = ROOT) -> list[str]:
    """Every test file outside tests/unit, relative to the checkout."""
    return sorted(str(p.relative_to(root)) for p in (root / "tests").rglob("test_*.py")
                  if "unit" not in p.relative_to(root / "tests").parts[:1])


def split(files: list[str], weights: dict[str, float], lanes: int = 2) -> list[list[str]]:
    """The files in `lanes` groups of about equal seconds: the heaviest unit first, each to the lane
    with the fewest seconds so far (longest processing time first). A folder of UNITS_TOGETHER is one unit."""
    units: dict[str, list[str]] = {}
    for f in files:
        unit = next((d for d in UNITS_TOGETHER if f.startswith(d + "/")), f)
        units.setdefault(unit, []).append(f)
    seconds = {u: sum(weights.get(f, UNKNOWN_FILE_S) for f in fs) for u, fs in units.items()}
    groups: list[list[str]] = [[] for _ in range(lanes)]
    totals = [0.0] * lanes
    for unit in sorted(units, key=lambda u: (-seconds[u], u)):
        i = totals.index(min(totals))
        groups[i] += units[unit]
        totals[i] += seconds[unit]
    return [sorted(g) for g in groups]


def _weights() -> dict[str, float]:
    return json.loads(WEIGHTS.read_text())["seconds"] if WEIGHTS.is_file() else {}


def _unit_lane(python: str, args: list[str], log: Path, result: dict, stop_others) -> None:
    env = dict(os.environ)
    times = unit_times_file(env.get("CDCKIT_TEST_TIMES"))
    if times:
        env["CDCKIT_TEST_TIMES"] = times
    with log.open("w") as out:
        # Only a speed-up for the drivers of both lanes; it never fails the run (the module says why).
        subprocess.run([python, "-m", "pipelines.spark.class_archive"], stdout=out, stderr=subprocess.STDOUT,
                       env=env, cwd=ROOT, check=False)
        out.flush()
        code = subprocess.run([python, "-m", "pytest", *args, "-p", "no:cacheprovider", "tests/unit"],
                              stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT, check=False).returncode
    result["code"] = code
    if code != 0:
        stop_others("unit")


def _stack_lane(python: str, args: list[str], files: list[str], lane: int, log: Path | None) -> subprocess.Popen:
    env = dict(os.environ)
    times = lane_times_file(env.get("CDCKIT_TEST_TIMES"), lane)
    if times:
        env["CDCKIT_TEST_TIMES"] = times
    if lane > 1:
        shift = int(env.get("CDCKIT_TEST_PORT_SHIFT", "0")) + SECOND_STACK_SHIFT * (lane - 1)
        env["CDCKIT_TEST_PORT_SHIFT"] = str(shift)
    # The jobs' metrics port, one per lane and never cdckit's default 9464: no job answers for another
    # lane's, nor for the image rehearsal's health check (the unit lane: it shares the host's network).
    env["CDCKIT_TEST_METRICS_PORT"] = str(METRICS_PORT + lane)
    out = log.open("w") if log else None
    return subprocess.Popen([python, "-m", "pytest", *args, *files], cwd=ROOT, env=env, stdout=out,
                            stderr=subprocess.STDOUT if out else None)


def run(args: list[str]) -> int:
    python = sys.executable
    all_tiers = "--all-tiers" in args
    logs = Path(os.environ.get("CDCKIT_UNIT_LOG", ROOT / ".drills" / "unit.log")).parent
    logs.mkdir(parents=True, exist_ok=True)
    unit_log = Path(os.environ.get("CDCKIT_UNIT_LOG", logs / "unit.log"))
    failures = logs / "failed-tiers"
    failures.unlink(missing_ok=True)
    os.environ[SHARED_FAILURES] = str(failures)
    groups = [g for g in split(stack_test_files(), _weights()) if g]
    lane_logs = [None] + [logs / f"lane{n}.log" for n in range(2, len(groups) + 1)]
    stacks = [_stack_lane(python, args, files, n, lane_logs[n - 1]) for n, files in enumerate(groups, 1)]
    stopped: list[str] = []

    def stop_others(failed: str):
        if all_tiers:
            return
        stopped.append(failed)
        for proc in stacks:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)

    unit: dict = {}
    unit_lane = threading.Thread(target=_unit_lane, args=(python, args, unit_log, unit, stop_others), daemon=True)
    unit_lane.start()
    try:
        codes = [p.wait() for p in stacks]
    except KeyboardInterrupt:  # ctrl-c reached every process; wait for the lanes' teardown
        codes = [p.wait() for p in stacks]
    unit_lane.join()
    for n, log in enumerate(lane_logs[1:], 2):
        print(f"\n---- stack lane {n} (ran beside the first; log {log}): {', '.join(groups[n - 1])} ----", flush=True)
        sys.stdout.write(log.read_text(errors="replace"))
    print(f"\n---- the unit tier (ran beside the others; log {unit_log}) ----", flush=True)
    sys.stdout.write(unit_log.read_text(errors="replace"))
    if stopped:
        print(f"\nthe {stopped[0]} failed: the other lanes were interrupted "
              "(scripts/test --all-tiers runs them anyway)", flush=True)
    return next((c for c in [unit.get("code", 1), *codes] if c), 0)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
