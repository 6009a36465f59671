"""CPU per change, per process role, at set commit rates: what hardware cdckit needs for N changes
per second, stated so that it holds on any machine (issue #40, items 1 and 2).

The load costs almost nothing: `pgbench` (it ships with PostgreSQL) runs a one-statement script at
a fixed rate (`-R`), one commit per transaction, so no Python load generator or poller shares the
cores with what is measured. Freshness comes from the pipeline's own histogram
(`cdckit_change_visible_seconds`: applied time minus Debezium's commit timestamp, both stores).

Per phase (idle first: nothing changes; then each rate), from /proc: the CPU seconds of every
process of each role (Postgres, Connect/Debezium, the broker, the cdckit command's Python process,
the Spark driver JVM, the Python workers, the search engine, Redis, the load), divided by the change
events Debezium produced in the phase: microseconds of CPU per change. The job's micro-batches are counted
(`cdckit_batch_duration_seconds_count`), and cdckit's own CPU (command, driver JVM, workers) is split by least
squares over the phases into a fixed cost per micro-batch and a cost per change. Headroom: changes
per second one core of cdckit's own processes can carry at that cost.

    .venv/bin/python benchmarks/cpu_per_change.py [--rates 250,500,1000,2000] [--duration 30] [--idle 20]
                                                  [--trigger "500 ms"] [--label NAME]

Run it on a quiet machine (no test suite, no second stack). Writes benchmarks/results/cpu_per_change.json.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (ROOT, RssSampler, bench_stack, create_orders, job_config, pgbench,  # noqa: E402
                               scratch_dir, stop_job, wait_caught_up, write_result)
from benchmarks.freshness_report import histogram_percentiles  # noqa: E402

ROWS = 20_000
HOT = 2_000
METRICS_PORT = 29784   # below the ephemeral range (32768-60999): no outgoing connection holds it
# The command's own Python process (the batch's driver-side code: foreachBatch, the status file,
# metrics) apart from its Spark driver JVM: which of the two a micro-batch's fixed cost is.
CDCKIT_ROLES = ("cdckit command", "spark driver", "python workers")
ROLE_ORDER = ("postgres", "kafka connect", "kafka broker", "cdckit command", "spark driver", "python workers",
              "opensearch", "redis", "load", "benchmark")
PGBENCH_SCRIPT = (f"\\set id random(1, {HOT})\n"
                  "UPDATE {table} SET seq = seq + 1, amount = amount + 1, updated_at = now() WHERE id = :id;\n")


def metrics(url: str) -> dict[str, float]:
    """The job's counters this benchmark reads: batches, records applied, the visibility histogram."""
    import requests

    out: dict[str, float] = {}
    for line in requests.get(url, timeout=5).text.splitlines():
        if line.startswith(("cdckit_batch_duration_seconds_count", "cdckit_records_total",
                            "cdckit_change_visible_seconds_bucket")) and " " in line:
            name, value = line.rsplit(" ", 1)
            out[name] = out.get(name, 0.0) + float(value)
    return out


ENGINE_OPS = {"refresh": ("refresh", "total"), "external refresh": ("refresh", "external_total"),
              "search": ("search", "query_total"), "get": ("get", "total"), "index": ("indexing", "index_total"),
              "merge": ("merges", "total"), "merged docs": ("merges", "total_docs"), "flush": ("flush", "total")}


def engine_ops(search_url: str) -> dict[str, int]:
    """The search engine's operation counters summed over its indexes: what the job asks of it."""
    import requests

    nodes = requests.get(f"{search_url}/_nodes/stats/indices", timeout=10).json()["nodes"]
    out = dict.fromkeys(ENGINE_OPS, 0)
    for node in nodes.values():
        for name, (group, field) in ENGINE_OPS.items():
            out[name] += int(node["indices"].get(group, {}).get(field, 0))
    return out


def visible_histogram(m: dict[str, float]) -> dict[float, float]:
    out = {}
    for name, value in m.items():
        if name.startswith("cdckit_change_visible_seconds_bucket"):
            le = name.split('le="', 1)[1].split('"', 1)[0]
            out[float("inf") if le == "+Inf" else float(le)] = out.get(float("inf") if le == "+Inf" else float(le),
                                                                          0.0) + value
    return out


def cpu_by_role(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> dict[str, float]:
    """CPU seconds each role used between two samples taken with reaped children's time
    (RssSampler.cpu_seconds(reaped=True)): a role's total moves continuously as its processes end
    and are reaped by their parents, so the difference of the totals is what ran in between."""
    def totals(sample):
        out: dict[str, float] = {}
        for role, cpu in sample.values():
            out[role] = out.get(role, 0.0) + cpu
        return out

    b, a = totals(before), totals(after)
    return {role: max(0.0, a.get(role, 0.0) - b.get(role, 0.0)) for role in a.keys() | b.keys()}


def machine_busy_s() -> float:
    """CPU seconds the whole machine has been busy (all cores, /proc/stat): the ceiling any sum of
    roles must stay under."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)   # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def fixed_and_per_change(phases: list[dict]) -> dict[str, float | None]:
    """cdckit's own CPU seconds in each phase = a * batches + b * changes (+ c * seconds: the idle
    polling), fitted by least squares: a the fixed cost of a micro-batch, b the cost of a change."""
    import numpy as np

    rows = [(p["batches"], p["changes"], p["window_s"]) for p in phases]
    cpu = [sum(p["cpu_s"].get(r, 0.0) for r in CDCKIT_ROLES) for p in phases]
    if len(rows) < 3:
        return {"per_batch_ms": None, "per_change_us": None, "idle_cores": None}
    (a, b, c), *_ = np.linalg.lstsq(np.array(rows, dtype=float), np.array(cpu), rcond=None)
    return {"per_batch_ms": round(float(a) * 1e3, 2), "per_change_us": round(float(b) * 1e6, 1),
            "idle_cores": round(float(c), 3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", default="250,500,1000,2000")
    ap.add_argument("--duration", type=float, default=30)
    ap.add_argument("--idle", type=float, default=20, help="seconds measured with nothing changing")
    ap.add_argument("--warmup", type=float, default=40, help="seconds of load at the first rate first, not measured")
    ap.add_argument("--trigger", default="500 ms")
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--label", default="")
    ap.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting for the job (repeatable): an A/B of a driver default")
    ap.add_argument("--index-setting", action="append", default=[], metavar="KEY=VALUE",
                    help="a setting of the table's index (repeatable), e.g. refresh_interval=5s")
    ap.add_argument("--heartbeat-ms", type=int, default=10_000,
                    help="Debezium's heartbeat interval (cdckit's default): each heartbeat makes a batch when idle")
    args = ap.parse_args()
    import redis
    import requests
    import yaml

    from connectors.kafka.offsets import end_offsets

    rates = [int(r) for r in args.rates.split(",")]
    tmp = scratch_dir("cdckit-cpu-")
    with bench_stack() as s, RssSampler(s) as sampler:
        sampler.add_root(os.getpid(), "benchmark")
        prefix = f"f{uuid.uuid4().hex[:6]}"
        table = f"public.{prefix}_orders"
        dsn = dict(host="127.0.0.1", port=s.ports["postgres"], dbname="cdckit", user="postgres")
        create_orders(dsn, table, ROWS)
        config = job_config(s, dsn, prefix, table, args.partitions, args.trigger, tmp / "ckpt", METRICS_PORT,
                            args.heartbeat_ms)
        if args.spark_conf:
            config["spark"]["conf"] = dict(kv.split("=", 1) for kv in args.spark_conf)
        if args.index_setting:
            config["search"]["index_settings"].update(kv.split("=", 1) for kv in args.index_setting)
        path = tmp / "cdckit.yaml"
        path.write_text(yaml.safe_dump(config))
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
        cdckit = [sys.executable, "-m", "pipelines.cli"]
        topic = f"{prefix}.{table}"
        script = tmp / "load.sql"
        script.write_text(PGBENCH_SCRIPT.replace("{table}", table))
        subprocess.run([*cdckit, "connector", "apply", "-c", str(path)], cwd=ROOT, env=env, check=True)
        log = tmp / "job.log"
        job = subprocess.Popen([*cdckit, "run", "-c", str(path)], cwd=ROOT, env=env, start_new_session=True,
                               stdout=open(log, "wb"), stderr=subprocess.STDOUT)
        sampler.add_root(job.pid, "cdckit command")   # its JVM child is "spark driver" (common._role)
        url = f"http://127.0.0.1:{METRICS_PORT}/metrics"
        r = redis.Redis.from_url(s.redis_url)

        def produced() -> int:
            return sum(int(o) for o in end_offsets({"bootstrap.servers": s.bootstrap_servers}, [topic])
                       .get(topic, {}).values())

        phases = []
        try:
            t0 = time.perf_counter()
            while int(r.get(f"cdckit:count:{prefix}:{{id}}") or 0) < ROWS:
                if job.poll() is not None or time.perf_counter() - t0 > 300:
                    raise SystemExit("the pipeline did not apply the snapshot:\n" + log.read_text()[-3000:])
                time.sleep(1)
            snapshot = {"rows": ROWS, "seconds_from_job_start": round(time.perf_counter() - t0, 1)}
            print(f"snapshot of {ROWS:,} rows applied in {snapshot['seconds_from_job_start']} s", flush=True)
            # Warm-up: Python workers started, Debezium streaming, the JVMs' JIT (at 10 s the first
            # rate's phase paid ~8 CPU s of the engine's compiling and ~2 of the driver's: a second
            # phase at the same rate right after it cost that much less); then everything applied.
            pgbench(dsn, script, rates[0], args.warmup)
            _settle(s.bootstrap_servers, tmp / "ckpt", topic)
            for rate in [0, *rates]:
                seconds = args.idle if rate == 0 else args.duration
                ops0 = engine_ops(s.search_url)
                m0, end0, cpu0, t = metrics(url), produced(), sampler.cpu_seconds(reaped=True), time.perf_counter()
                plain0, busy0 = sampler.cpu_seconds(), machine_busy_s()
                load_cpu = 0.0
                with sampler.phase(str(rate or "idle")):
                    if rate:
                        load_cpu = pgbench(dsn, script, rate, seconds)
                    else:
                        time.sleep(seconds)
                wall = time.perf_counter() - t
                changes = produced() - end0
                _settle(s.bootstrap_servers, tmp / "ckpt", topic)   # the tail applied: its CPU is these changes'
                cpu1, m1, ops1 = sampler.cpu_seconds(reaped=True), metrics(url), engine_ops(s.search_url)
                plain1, busy1, window = sampler.cpu_seconds(), machine_busy_s(), time.perf_counter() - t
                used = cpu_by_role(cpu0, cpu1)
                live_only = cpu_by_role(plain0, plain1)
                # pgbench is this process's child: its time, reaped into ours, is the load's.
                used["load"] = load_cpu
                used["benchmark"] = max(0.0, used.get("benchmark", 0.0) - load_cpu)
                phase = {
                    "rate": rate, "seconds": round(wall, 1), "changes": changes,
                    "changes_per_s": round(changes / wall, 1),
                    "batches": int(m1.get("cdckit_batch_duration_seconds_count", 0)
                                   - m0.get("cdckit_batch_duration_seconds_count", 0)),
                    "cpu_s": {k: round(v, 3) for k, v in used.items()},
                    "cores": {k: round(v / window, 3) for k, v in used.items()},
                    "us_per_change": {k: round(v / changes * 1e6, 1) for k, v in used.items()} if changes else {},
                    "visible": histogram_percentiles(visible_histogram(m0), visible_histogram(m1)),
                    # What the job asked of the search engine in the phase (its CPU follows the batches).
                    "engine_ops": {k: ops1[k] - ops0[k] for k in ENGINE_OPS},
                    # The check on the accounting: the roles' sum against the machine's busy time
                    # over the same window (the tail's settling included), and the roles without
                    # the time of processes that ended (what the earlier benchmarks reported).
                    "window_s": round(window, 1), "machine_busy_s": round(busy1 - busy0, 2),
                    "roles_sum_s": round(sum(used.values()), 2),
                    "live_only_cpu_s": {k: round(v, 3) for k, v in live_only.items()},
                }
                own = sum(used.get(k, 0.0) for k in CDCKIT_ROLES)
                connect = used.get("kafka connect", 0.0)
                phase["cdckit_vs_debezium_cpu"] = round(own / connect, 2) if connect else None
                phase["cdckit_changes_per_core_s"] = round(changes / own) if own and changes else None
                phases.append(phase)
                print(f"{rate or 'idle':>6}: {changes:,} changes in {wall:.1f} s (+{window - wall:.1f} s to apply the "
                      f"tail), {phase['batches']} batches, cdckit {own / window:.2f} cores, Debezium "
                      f"{connect / window:.2f}, visible {phase['visible']}; engine {phase['engine_ops']}", flush=True)
        finally:
            stop_job(job)
            sampler.remove_root(job.pid)
            requests.delete(f"{s.connect_url}/connectors/{prefix}-postgres", timeout=30)
    result = {"rates": rates, "duration_s": args.duration, "idle_s": args.idle, "trigger": args.trigger,
              "heartbeat_ms": args.heartbeat_ms, "spark_conf": args.spark_conf,
              "index_settings": args.index_setting, "partitions": args.partitions,
              "rows": ROWS, "phases": phases,
              "fit": fixed_and_per_change(phases), "memory": sampler.as_json(),
              "snapshot": snapshot, "machine_detail": _machine()}
    write_result("cpu_per_change" + (f"_{args.label}" if args.label else ""), result)
    print_table(result)
    print(sampler.table())


def _settle(bootstrap: str, checkpoint: Path, topic: str) -> None:
    """Until the tail is applied. (Not "the applied counter stopped moving": Debezium's heartbeats
    keep it moving on an idle database.)"""
    if not wait_caught_up(bootstrap, checkpoint, topic):
        raise SystemExit(f"the job did not apply {topic} to its end within 120 s")


def _machine() -> dict:
    info = {"cores": os.cpu_count()}
    try:
        cpu = Path("/proc/cpuinfo").read_text()
        info["model"] = next((l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith("model name")), None)
        mem = Path("/proc/meminfo").read_text().splitlines()[0].split()[1]
        info["memory_gib"] = round(int(mem) / 1024 / 1024, 1)
    except OSError:
        pass
    return info


def print_table(result: dict) -> None:
    phases = result["phases"]
    print(f"\nCPU µs per change by role ({result['machine_detail']})")
    print(f"{'role':<16}" + "".join(f"{p['rate'] or 'idle':>10}" for p in phases))
    roles = [r for r in ROLE_ORDER if any(r in p["cpu_s"] for p in phases)]
    for role in roles:
        cells = []
        for p in phases:
            v = p["us_per_change"].get(role) if p["changes"] else p["cores"].get(role)
            cells.append("-" if v is None else (f"{v:.2f}c" if not p["changes"] else f"{v:,.0f}"))
        print(f"{role:<16}" + "".join(f"{c:>10}" for c in cells))
    print(f"{'cdckit/Debezium':<16}" + "".join(f"{p['cdckit_vs_debezium_cpu'] or '-':>10}" for p in phases))
    print(f"{'visible p50 s':<16}" + "".join(f"{p['visible'].get('p50') or '-':>10}" for p in phases))
    print(f"{'visible p99 s':<16}" + "".join(f"{p['visible'].get('p99') or '-':>10}" for p in phases))
    print(f"(idle column: cores busy with nothing changing)\nfit of cdckit's own CPU: {result['fit']}")


if __name__ == "__main__":
    main()
