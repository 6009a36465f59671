"""scripts/test's whole-suite run in two lanes, two pytest processes at once:

- the unit lane: the Spark driver's class archive when missing (scripts/setup leaves it to this lane),
  then `tests/unit/`, its output kept in a log and printed when the run ends;
- the main lane: every other tier (integration, then drills) in the foreground, starting the stack at once.

The unit tier needs no server and the integration tier leaves about 29% of two cores idle (it waits
on servers; vmstat over a whole run), so the unit tier (~2-3 min with the archive) no longer sits on the
run's critical path; it costs the main lane only the cores it takes while both run. A failing unit
lane still stops the run, as the tiers do in one process: the main lane gets SIGINT (pytest's
KeyboardInterrupt: fixtures torn down, the stack stopped), unless --all-tiers. The exit code is the first non-zero of the two lanes.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def unit_times_file(times: str | None) -> str | None:
    """Where the unit lane writes its times (beside the main lane's file, which tiers.py merges)."""
    return str(Path(times).with_name("times-unit.json")) if times else None


def _unit_lane(python: str, args: list[str], log: Path, result: dict, stop_main) -> None:
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
        stop_main()


def run(args: list[str]) -> int:
    python = sys.executable
    all_tiers = "--all-tiers" in args
    log = Path(os.environ.get("CDCKIT_UNIT_LOG", ROOT / ".drills" / "unit.log"))
    log.parent.mkdir(parents=True, exist_ok=True)
    main = subprocess.Popen([python, "-m", "pytest", *args, "--ignore=tests/unit"], cwd=ROOT)
    stopped = threading.Event()

    def stop_main():
        if not all_tiers and main.poll() is None:
            stopped.set()
            main.send_signal(signal.SIGINT)

    unit: dict = {}
    lane = threading.Thread(target=_unit_lane, args=(python, args, log, unit, stop_main), daemon=True)
    lane.start()
    try:
        main_code = main.wait()
    except KeyboardInterrupt:  # ctrl-c reached both processes; wait for the main lane's teardown
        main_code = main.wait()
    lane.join()
    print(f"\n---- the unit tier (ran beside the others; log {log}) ----", flush=True)
    sys.stdout.write(log.read_text(errors="replace"))
    if stopped.is_set():
        print("\nthe unit tier failed: the integration and drill tiers were stopped "
              "(scripts/test --all-tiers runs them anyway)", flush=True)
    unit_code = unit.get("code", 1)
    return unit_code or main_code


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
