"""The first minute (issue #40, item 6): a 10,000-row table synced into both stores by one
`cdckit bootstrap --once`, and where its time goes, fixed cost by fixed cost.

    .venv/bin/python benchmarks/first_minute.py [--rows 10000] [--runs 2]

Per run (a fresh table, prefix, slot, connector and checkpoint each; the bench stack stays up
between runs, as a user's stack does): every line the command prints is stamped with the seconds
since the command started, so the timeline shows the fixed costs in order: the CLI's start (Python
imports), the checks before anything starts, the connector's creation, Debezium's snapshot into
Kafka (a watcher on the table's topic), Spark's session, the bulk round, the exit. The stores are
polled meanwhile (Redis: the table's count key; the index: `_count`): "synced" is when both hold
every row. Also measured alone: `cdckit --version` (the CLI's start with nothing to do).
Target (issue #40): synced within 10 s of the command. Writes benchmarks/results/first_minute.json.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import ROOT, bench_stack, scratch_dir, create_orders, job_config, write_result  # noqa: E402

# Lines of the command's output that mark a step's end, in the order they come.
MARKS = (
    ("connector created", re.compile(r"^connector \S+: ")),
    ("snapshot counted", re.compile(r"^snapshot: ")),
    ("spark session up", re.compile(r"Spark session up")),
)


def run_once(s, rows: int, tmp: Path, debug: bool = False) -> dict:
    import redis
    import requests
    import yaml

    from connectors.kafka.offsets import end_offsets

    prefix = f"f{uuid.uuid4().hex[:6]}"
    table = f"public.{prefix}_orders"
    dsn = dict(host="127.0.0.1", port=s.ports["postgres"], dbname="cdckit", user="postgres")
    create_orders(dsn, table, rows)
    config = job_config(s, dsn, prefix, table, 2, "500 ms", tmp / prefix / "ckpt", 0, heartbeat_ms=10_000)
    config.pop("metrics_port")
    path = tmp / f"{prefix}.yaml"
    path.write_text(yaml.safe_dump(config))
    # Unbuffered: each line stamped when it is written, not when a pipe's buffer fills.
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONUNBUFFERED": "1"}
    topic = f"{prefix}.{table}"
    r = redis.Redis.from_url(s.redis_url)
    seen: dict[str, float] = {}
    done = threading.Event()

    def watch(started: float) -> None:
        while not done.is_set():
            now = time.perf_counter() - started
            if "in kafka" not in seen:
                ends = end_offsets({"bootstrap.servers": s.bootstrap_servers}, [topic]).get(topic, {})
                if sum(int(v) for v in ends.values()) >= rows:
                    seen["in kafka"] = now
            if "redis" not in seen and int(r.get(f"cdckit:count:{prefix}:{{id}}") or 0) >= rows:
                seen["redis"] = now
            if "search" not in seen:
                try:
                    got = requests.get(f"{s.search_url}/{prefix}/_count", timeout=5).json().get("count", 0)
                except (requests.RequestException, ValueError):
                    got = 0
                if got >= rows:
                    seen["search"] = now
            time.sleep(0.1)

    lines: list[tuple[float, str]] = []
    started = time.perf_counter()
    watcher = threading.Thread(target=watch, args=(started,), daemon=True)
    watcher.start()
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "bootstrap", "--once", "-c", str(path),
                             *(["--debug"] if debug else [])], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        lines.append((round(time.perf_counter() - started, 2), line.rstrip()))
    code = proc.wait()
    exit_s = time.perf_counter() - started
    time.sleep(0.5)
    done.set()
    watcher.join(5)
    if code != 0:
        print("\n".join(f"{t:7.2f}  {line}" for t, line in lines[-40:]))
        raise SystemExit(f"bootstrap failed (exit {code})")
    steps = {"first line": lines[0][0] if lines else None}
    for name, pattern in MARKS:
        steps[name] = next((t for t, line in lines if pattern.search(line)), None)
    steps["snapshot in kafka"] = seen.get("in kafka")
    steps["redis synced"] = seen.get("redis")
    steps["search synced"] = seen.get("search")
    steps["exit"] = round(exit_s, 2)
    # A store that never held every row: the run is not "synced" at its exit, it lost rows.
    every_row = "redis" in seen and "search" in seen
    synced = max(seen.get("redis") or exit_s, seen.get("search") or exit_s)
    requests.delete(f"{s.connect_url}/connectors/{prefix}-postgres", timeout=30)
    return {"prefix": prefix, "rows": rows, "synced_s": round(synced, 2), "exit_s": round(exit_s, 2),
            "every_row": every_row,
            "steps_s": {k: (round(v, 2) if v is not None else None) for k, v in steps.items()},
            "timeline": lines}


def cli_start_s() -> float:
    """`cdckit --version`: the interpreter and the CLI's imports, nothing else."""
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pipelines.cli", "--version"], cwd=ROOT, check=True, capture_output=True)
    return round(time.perf_counter() - t, 2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--debug", action="store_true", help="the command's debug lines in the timeline too")
    args = ap.parse_args()
    tmp = scratch_dir("cdckit-first-minute-")
    runs = []
    with bench_stack() as s:
        version_s = min(cli_start_s() for _ in range(3))
        for i in range(args.runs):
            result = run_once(s, args.rows, tmp, args.debug)
            runs.append(result)
            print(f"run {i + 1}: {args.rows:,} rows synced into both stores in {result['synced_s']} s "
                  f"(exit {result['exit_s']} s)" if result["every_row"] else
                  f"run {i + 1}: ROWS MISSING: a store did not hold all {args.rows:,} rows after the command's "
                  f"exit ({result['exit_s']} s)", flush=True)
            for name, t in result["steps_s"].items():
                print(f"  {name:<20} {'-' if t is None else f'{t:6.2f} s'}")
    complete = [r for r in runs if r["every_row"]]
    if not complete:
        raise SystemExit("no run synced every row into both stores")
    best = min(complete, key=lambda r: r["synced_s"])
    print(f"`cdckit --version`: {version_s} s; best run synced in {best['synced_s']} s (target 10 s)")
    print("timeline of the best run:")
    for t, line in best["timeline"]:
        print(f"  {t:7.2f}  {line[:160]}")
    write_result("first_minute", {"rows": args.rows, "cli_version_s": version_s, "runs": runs,
                                  "best_synced_s": best["synced_s"], "target_s": 10.0,
                                  "runs_missing_rows": len(runs) - len(complete)})
    if len(complete) < len(runs):
        raise SystemExit(f"{len(runs) - len(complete)} run(s) left rows out of a store")


if __name__ == "__main__":
    main()
