"""The benchmark page's headline table, rerun with one command (issue #40, item 7): the benchmarks a
user asks about run one after another on a quiet machine, then their JSON results are read back
into one table with the machine it ran on.

    .venv/bin/python benchmarks/summary.py [--rows 1000000] [--rates 250,500,1000,2000] [--readme]
    .venv/bin/python benchmarks/summary.py --from-results [--readme]   # the table of the last runs only

- `bootstrap_1m.py --rows N`: Debezium's snapshot into Kafka (rows/s) and start-to-synced for Redis
  alone, the index alone, both;
- `cpu_per_change.py --rates ...`: CPU per change per role, cdckit against Debezium, freshness
  p50/p99 from the job's own histogram, peak memory per role;
- `real_time_mode.py --rate 500`: Spark's Real-Time Mode beside the micro-batch trigger;
- `first_minute.py --runs 3`: a 10,000-row table into both stores by one `bootstrap --once`;
- `beside_pgsync.py`: cdckit beside pgsync 7.3.0 on the same stack and table (search only): initial
  sync, update latency p50/p99 after 10 s of the same updates (those apart), deletes, CPU.

Writes benchmarks/results/summary.json and summary.md; `--readme` puts the table into
benchmarks/README.md between its summary markers. Each script brings up and stops the bench stack.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import RESULTS, ROOT, write_result  # noqa: E402

README = ROOT / "benchmarks" / "README.md"
START, END = "<!-- summary:start -->", "<!-- summary:end -->"
CDCKIT_ROLES = ("cdckit command", "spark driver", "python workers")


def run(script: str, *args: str) -> None:
    print(f"== {script} {' '.join(args)}", flush=True)
    t = time.perf_counter()
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], cwd=ROOT, check=True)
    print(f"== {script}: {time.perf_counter() - t:.0f} s", flush=True)


def load(name: str) -> dict | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _n(v, digits: int = 0) -> str:
    if v is None:
        return "-"
    return f"{v:,.{digits}f}"


def table(cpu: dict | None, boot: dict | None, rtm: dict | None, first: dict | None = None,
          pgsync: dict | None = None) -> str:
    """The headline table as markdown, from whichever results exist."""
    lines = []
    machine = (cpu or {}).get("machine_detail") or {}
    if machine:
        lines.append(f"Machine: {machine.get('cores')} cores ({machine.get('model')}), {machine.get('memory_gib')} GiB; "
                     "the whole stack on it. " + ", ".join(
                         f"{name} {r['at'][:10]}" for name, r in (("cpu_per_change", cpu), ("bootstrap_1m", boot),
                                                                  ("real_time_mode", rtm), ("first_minute", first),
                                                                  ("beside_pgsync", pgsync))
                         if r))
        lines.append("")
    lines += ["| measure | figure |", "|---|---|"]
    if boot:
        runs = boot["by_run"]
        snap = [r.get("snapshot_rows_per_s") for r in runs.values() if r.get("snapshot_rows_per_s")]
        if snap:
            lines.append(f"| snapshot: Debezium into Kafka, {boot['rows']:,} rows | {_n(max(snap))} rows/s |")
        for run_name, label in (("cache", "Redis alone"), ("search", "search index alone"), ("both", "both stores")):
            r = runs.get(run_name)
            if r:
                ratio = (f" ({r['synced_s'] / r['snapshot_into_kafka_s']:.2f}x the snapshot's time)"
                         if r.get("snapshot_into_kafka_s") else "")
                lines.append(f"| bootstrap, {label}: start to synced | {r['synced_s']} s, {_n(r['rows_per_s'])} rows/s"
                             f"{ratio}{'' if r.get('every_row') else ', ROWS MISSING'} |")
    if first:
        runs = first["runs"]
        missing = sum(1 for r in runs if not r.get("every_row", True))
        lines.append(f"| first minute: {first['rows']:,} rows into both stores by `bootstrap --once`, best of "
                     f"{len(runs)} (each run's figure) | {first['best_synced_s']} s ("
                     + ", ".join(f"{r['synced_s']}" for r in runs) + " s)"
                     + (f", ROWS MISSING in {missing} run(s)" if missing else "") + " |")
    if cpu:
        loaded = [p for p in cpu["phases"] if p["rate"]]
        idle = next((p for p in cpu["phases"] if not p["rate"]), None)
        if loaded:
            top = max(loaded, key=lambda p: p["changes_per_s"])
            lines.append(f"| sustained changes/s (asked {top['rate']:,}/s; every change applied, tail "
                         f"{top['window_s'] - top['seconds']:.1f} s) | {_n(top['changes_per_s'])} |")
        for p in loaded:
            v = p["visible"]
            own = sum(p["us_per_change"].get(r, 0.0) for r in CDCKIT_ROLES)
            lines.append(f"| at {p['rate']:,} commits/s: visible p50 / p99; cdckit CPU per change; vs Debezium | "
                         f"{v.get('p50')} / {v.get('p99')} s; {_n(own)} µs; {p['cdckit_vs_debezium_cpu']}x |")
        if idle:
            own = sum(idle["cores"].get(r, 0.0) for r in CDCKIT_ROLES)
            lines.append(f"| idle (nothing changing): cdckit cores | {own:.3f} |")
        fit = cpu.get("fit") or {}
        if fit.get("per_batch_ms") is not None:
            lines.append(f"| cdckit CPU per micro-batch / per change (least squares) | {fit['per_batch_ms']:.0f} ms / "
                         f"{fit['per_change_us']:.0f} µs |")
        peaks = ((cpu.get("memory") or {}).get("rss_peak_mb") or {})
        overall: dict[str, float] = {}
        for by_role in peaks.values():
            for role, mb in by_role.items():
                overall[role] = max(overall.get(role, 0), mb)
        if overall:
            lines.append("| peak memory (RSS) per role, MB | " + ", ".join(f"{r} {_n(mb)}" for r, mb in overall.items())
                         + " |")
    if rtm:
        modes = {m["mode"]: m for m in rtm["modes"]}
        cells = []
        names = {"real_time": "real-time, Python ForeachWriter", "micro_batch": "micro-batch, the same writer",
                 "real_time_jvm_sink": "real-time, Spark's Kafka sink (no Python)",
                 "real_time_arrow_udf": "real-time, Arrow UDF (Spark's allowlist check off)"}
        for mode, name in names.items():
            m = modes.get(mode)
            if m and m.get("started"):
                lat = m.get("latency_s") or {}
                cells.append(f"{name} p50 {lat.get('p50')} / p99 {lat.get('p99')} s, "
                             f"{m['written']:,} of {m['sent']:,} written")
            elif m:
                cells.append(f"{name}: refused ({str(m.get('error'))[:80]})")
        lines.append(f"| Spark Real-Time Mode vs micro-batch at {rtm['rate']}/s | " + "; ".join(cells) + " |")
    if pgsync:
        lines.append(beside_pgsync_row(pgsync))
    return "\n".join(lines) + "\n"


def beside_pgsync_row(r: dict) -> str:
    """cdckit against pgsync, each figure as cdckit's vs pgsync's and their ratio."""
    def pair(c, p, unit: str = " s") -> str:
        ratio = f" ({c / p:.2f}x)" if c is not None and p else ""
        return f"{c}{unit} vs {p}{unit}{ratio}"

    c, p = r["cdckit_update_latency_s"], r["pgsync_update_latency_s"]
    cells = [f"initial sync {pair(r['cdckit_initial_sync_s'], r['pgsync_initial_sync_s'])}",
             f"update p50 {pair(c.get('p50'), p.get('p50'))}, p99 {pair(c.get('p99'), p.get('p99'))}"]
    cw, pw = c.get("warmup") or {}, p.get("warmup") or {}
    if cw.get("seconds"):   # the updates' first seconds, apart: each tool's start shows there
        cells[-1] += f" (after {cw['seconds']:g} s of them; in those, p99 {pair(cw.get('p99'), pw.get('p99'))})"
    cd, pd = r.get("cdckit_deletes") or {}, r.get("pgsync_deletes") or {}
    if cd:
        cells.append(f"{cd['rows']:,} rows deleted in one transaction, gone in {pair(cd.get('all_gone_s'), pd.get('all_gone_s'))}"
                     f" (median of {cd.get('rounds', 1)})")
    own = r.get("own_cpu_s") or {}
    if own:
        cells.append(f"CPU of its own processes {pair(own['cdckit'], own['pgsync'], ' s')}; with Connect and the "
                     f"broker {own['cdckit_with_connect_and_broker']} s")
    return (f"| cdckit vs pgsync {r['pgsync']}, same stack, {r['rows']:,} rows, search only, updates at "
            f"{r['rate']}/s | " + "; ".join(cells) + " |")


def put_in_readme(text: str) -> None:
    page = README.read_text()
    if START not in page or END not in page:
        raise SystemExit(f"{README} has no {START} ... {END} block")
    head, rest = page.split(START, 1)
    _, tail = rest.split(END, 1)
    README.write_text(f"{head}{START}\n{text}{END}{tail}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000, help="bootstrap_1m's table size")
    ap.add_argument("--rates", default="250,500,1000,2000")
    ap.add_argument("--from-results", action="store_true", help="run nothing: the table of the last results")
    ap.add_argument("--readme", action="store_true", help="write the table into benchmarks/README.md")
    args = ap.parse_args()
    if not args.from_results:
        run("bootstrap_1m.py", "--rows", str(args.rows))
        run("cpu_per_change.py", "--rates", args.rates)
        run("real_time_mode.py", "--rate", "500")
        run("first_minute.py", "--runs", "3")
        run("beside_pgsync.py")
    cpu, boot, rtm = load("cpu_per_change"), load("bootstrap_1m"), load("real_time_mode")
    text = table(cpu, boot, rtm, load("first_minute"), load("beside_pgsync"))
    print(text)
    (RESULTS / "summary.md").write_text(text)
    write_result("summary", {"table_md": text})
    if args.readme:
        put_in_readme(text)
        print(f"wrote the table into {README}")


if __name__ == "__main__":
    main()
