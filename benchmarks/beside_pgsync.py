"""cdckit beside pgsync 7.3.0 on the same stack and the same table (issue #42, item 4): initial sync
time and update latency, each tool alone in its turn, one run.

    .venv/bin/python benchmarks/beside_pgsync.py [--rows 200000] [--rate 200] [--duration 30] [--warmup 10]
                                                 [--deletes 500] [--delete-rounds 5]

One table (`id, name, email, amount, status, seq, updated_at`), loaded once. pgsync (from PyPI in
a venv of its own, kept under .devstack/peer, as the side-by-side test keeps it) syncs it into an
index with its own `bootstrap` and `pgsync` (one-shot), then as a daemon; cdckit with `cdckit
bootstrap --once` (search only), then `cdckit run`. Per tool:
  initial_sync_s   from the first command's start until the index counts every row
  update latency   a writer updates random rows of 50 hot ones at --rate commits/s, each with a new
                   `seq`, recording the commit time; a poller searches the hot ids every 50 ms
                   (what a search sees after the engine's refresh); latency = first seen - commit,
                   counted after --warmup s of the same updates (reported apart: a job's first
                   batches after its start pay its workers' imports and the JVM's compiling)
  deletes          --deletes rows deleted in one transaction, --delete-rounds times 3 s apart (each
                   tool its own ids); the time from the commit until a search of those ids finds
                   none, polled every 20 ms: the median round and the slowest
  CPU              CPU seconds of each process role (from /proc) while the updates and the deletes
                   run: each tool's own processes (pgsync's daemon; cdckit's command, its Spark
                   driver and Python workers) and the servers (Postgres, Connect, the broker, the
                   engine, Redis); cdckit's Connect and broker counted beside its own
Writes benchmarks/results/beside_pgsync.json. A quiet machine: no suite, no second stack.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (ROOT, RssSampler, bench_stack, scratch_dir, create_orders, job_config,  # noqa: E402
                               searched_sources, stop_job, write_result)
from benchmarks.freshness_report import percentiles  # noqa: E402

PGSYNC = "7.3.0"
HOT = 50
QUEUE_DB = 1


def pgsync_bin() -> Path:
    venv = ROOT / ".devstack" / "peer" / f"pgsync-{PGSYNC}"
    if not (venv / "bin" / "pgsync").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", f"pgsync=={PGSYNC}"], check=True)
    return venv / "bin"


def count(url: str, index: str) -> int:
    import requests

    try:
        requests.post(f"{url}/{index}/_refresh", timeout=30)
        return int(requests.get(f"{url}/{index}/_count", timeout=30).json().get("count", 0))
    except (requests.RequestException, ValueError):
        return 0


def wait_count(url: str, index: str, rows: int, started: float, limit_s: float = 900) -> float:
    while time.perf_counter() - started < limit_s:
        if count(url, index) >= rows:
            return time.perf_counter() - started
        time.sleep(0.25)
    raise SystemExit(f"{index} did not reach {rows:,} documents within {limit_s:.0f} s")


def latency(dsn: dict, table: str, url: str, index: str, rate: int, seconds: float, warmup_s: float = 0) -> dict:
    """Commit-to-searchable for updates of hot rows at `rate` commits/s, for `warmup_s` then for
    `seconds`: the figures are the second part's (a tool in service is warm); the first part's are
    `warmup` (a job's first batches after its start pay its workers' imports and the JVM's compiling)."""
    import psycopg
    import requests

    committed: dict[tuple[str, int], float] = {}
    seen: dict[tuple[str, int], float] = {}
    stop = threading.Event()

    def poll() -> None:
        session = requests.Session()
        ids = [str(i) for i in range(1, HOT + 1)]
        while not stop.is_set():
            now = time.time()
            try:
                for doc_id, source in searched_sources(session, url, index, ids):
                    seen.setdefault((doc_id, int(source.get("seq") or 0)), now)
            except requests.RequestException:
                pass
            time.sleep(0.05)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    rnd, seq = random.Random(7), 1_000_000
    with psycopg.connect(**dsn, autocommit=True) as conn:
        end, nxt = time.perf_counter() + warmup_s + seconds, time.perf_counter()
        measured_from = time.time() + warmup_s
        while time.perf_counter() < end:
            i = rnd.randint(1, HOT)
            seq += 1
            conn.execute(f"UPDATE {table} SET seq = %s, updated_at = now() WHERE id = %s", (seq, i))
            committed[(str(i), seq)] = time.time()
            nxt += 1 / rate
            time.sleep(max(0.0, nxt - time.perf_counter()))
    time.sleep(15)   # the tail
    stop.set()
    poller.join(5)
    # A value overwritten before a poll saw it is not counted (the next one is).
    warm = [seen[k] - t for k, t in committed.items() if k in seen and t < measured_from]
    measured = {k: t for k, t in committed.items() if t >= measured_from}
    # (latency, when committed: s after the measured part began), slowest first: the tail's place too.
    slowest = sorted(((seen[k] - t, t - measured_from) for k, t in measured.items() if k in seen), reverse=True)
    lat = [late for late, _ in slowest]
    tail = [[round(at, 1), round(late, 2)] for late, at in slowest[:max(1, len(slowest) // 100)]]
    return {"commits": len(measured), "seen": len(lat), **percentiles(lat), "slowest_at_s": sorted(tail),
            "warmup": {"seconds": warmup_s, "seen": len(warm), **percentiles(warm)}}


def deletes(dsn: dict, table: str, url: str, index: str, first: int, rows: int, rounds: int,
            limit_s: float = 120) -> dict:
    """`rounds` times, 3 s apart: `rows` rows deleted in one transaction, and the seconds from its
    commit until a search of their ids finds none (the median and the slowest round: one round is
    one draw of where the commit fell in each tool's cycle)."""
    import psycopg
    import requests

    session = requests.Session()
    gone: list[float] = []
    with psycopg.connect(**dsn, autocommit=True) as conn:
        for n in range(rounds):
            low = first + n * rows
            ids = [str(i) for i in range(low, low + rows)]
            conn.execute(f"DELETE FROM {table} WHERE id >= %s AND id < %s", (low, low + rows))
            committed = time.perf_counter()
            while time.perf_counter() - committed < limit_s:
                try:
                    if not searched_sources(session, url, index, ids):
                        break
                except requests.RequestException:
                    pass
                time.sleep(0.02)
            else:
                return {"rows": rows, "rounds": n + 1, "all_gone_s": None, "timed_out_after_s": limit_s}
            gone.append(time.perf_counter() - committed)
            time.sleep(3)
    gone.sort()
    return {"rows": rows, "rounds": rounds, "all_gone_s": round(statistics.median(gone), 3),
            "slowest_s": round(gone[-1], 3), "each_s": [round(g, 3) for g in gone]}


def own_cpu(cpu_s: dict[str, float], own: tuple[str, ...]) -> float:
    return round(sum(v for role, v in cpu_s.items() if role in own), 1)


PGSYNC_OWN = ("pgsync",)
CDCKIT_OWN = ("cdckit command", "spark driver", "python workers")
CDCKIT_WITH_SOURCE = CDCKIT_OWN + ("kafka connect", "kafka broker")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--rate", type=int, default=200)
    ap.add_argument("--duration", type=float, default=30)
    ap.add_argument("--warmup", type=float, default=10,
                    help="seconds of the same updates before the measured ones (reported apart as `warmup`)")
    ap.add_argument("--deletes", type=int, default=500, help="rows deleted in one transaction")
    ap.add_argument("--delete-rounds", type=int, default=5, choices=range(1, 21), metavar="1-20",
                    help="such deletes per tool, 3 s apart")
    args = ap.parse_args()
    import psycopg
    import requests
    import yaml

    bins = pgsync_bin()
    tmp = scratch_dir("cdckit-beside-pgsync-")
    result: dict = {"rows": args.rows, "rate": args.rate, "duration_s": args.duration, "warmup_s": args.warmup,
                    "pgsync": PGSYNC}
    # Each tool deletes its own rows, above the hot ones.
    pgsync_deleted, cdckit_deleted = HOT + 1, HOT + 1 + args.deletes * args.delete_rounds
    with bench_stack() as s, RssSampler(s) as sampler:
        prefix = f"f{uuid.uuid4().hex[:6]}"
        table = f"public.{prefix}_orders"
        dsn = dict(host="127.0.0.1", port=s.ports["postgres"], dbname="cdckit", user="postgres")
        create_orders(dsn, table, args.rows)
        with psycopg.connect(**dsn, autocommit=True) as conn:
            conn.execute(f"ANALYZE {table}")

        # pgsync alone
        index = f"pgsync-{prefix}"
        schema = tmp / "schema.json"
        schema.write_text(json.dumps([{"database": "cdckit", "index": index, "nodes": {"table": f"{prefix}_orders"}}]))
        env = {**os.environ, "PG_HOST": "127.0.0.1", "PG_PORT": str(s.ports["postgres"]), "PG_USER": "postgres",
               "OPENSEARCH": "true", "ELASTICSEARCH_URL": s.search_url,
               "REDIS_URL": f"{s.redis_url.rsplit('/', 1)[0]}/{QUEUE_DB}", "CHECKPOINT_PATH": str(tmp),
               "LOG_LEVEL": "WARNING"}
        started = time.perf_counter()
        subprocess.run([str(bins / "bootstrap"), "--config", str(schema)], env=env, check=True, capture_output=True)
        subprocess.run([str(bins / "pgsync"), "--config", str(schema)], env=env, check=True, capture_output=True)
        result["pgsync_initial_sync_s"] = round(wait_count(s.search_url, index, args.rows, started), 1)
        print(f"pgsync: {args.rows:,} rows in {result['pgsync_initial_sync_s']} s", flush=True)
        daemon = subprocess.Popen([str(bins / "pgsync"), "--config", str(schema), "--daemon"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        sampler.add_root(daemon.pid, "pgsync")
        try:
            time.sleep(5)
            with sampler.phase("pgsync"):
                result["pgsync_update_latency_s"] = latency(dsn, table, s.search_url, index, args.rate,
                                                            args.duration, args.warmup)
                result["pgsync_deletes"] = deletes(dsn, table, s.search_url, index, pgsync_deleted, args.deletes,
                                                  args.delete_rounds)
            print(f"pgsync: update latency {result['pgsync_update_latency_s']}; deletes {result['pgsync_deletes']}",
                  flush=True)
        finally:
            sampler.remove_root(daemon.pid)
            os.killpg(daemon.pid, signal.SIGTERM)
            daemon.wait(60)
            subprocess.run([str(bins / "bootstrap"), "--config", str(schema), "--teardown"], env=env,
                           capture_output=True)
            requests.delete(f"{s.search_url}/{index}", timeout=60)

        # cdckit alone (search only, as pgsync writes)
        config = job_config(s, dsn, prefix, table, 2, "500 ms", tmp / "ckpt", 29790, heartbeat_ms=10_000)
        config["sinks"] = ["search"]
        config["tables"][0]["index"] = f"cdckit-{prefix}"
        path = tmp / "cdckit.yaml"
        path.write_text(yaml.safe_dump(config))
        cdckit = [sys.executable, "-m", "pipelines.cli"]
        cenv = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
        with psycopg.connect(**dsn) as conn:   # less pgsync's deletes
            rows = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        started = time.perf_counter()
        subprocess.run([*cdckit, "bootstrap", "--once", "-c", str(path)], cwd=ROOT, env=cenv, check=True,
                       capture_output=True)
        result["cdckit_initial_sync_s"] = round(wait_count(s.search_url, f"cdckit-{prefix}", rows, started), 1)
        print(f"cdckit: {args.rows:,} rows in {result['cdckit_initial_sync_s']} s", flush=True)
        job_log = (tmp / "cdckit-run.log").open("wb")   # kept with CDCKIT_BENCH_KEEP_TMP=1
        job = subprocess.Popen([*cdckit, "run", "-c", str(path)], cwd=ROOT, env=cenv, stdout=job_log,
                               stderr=subprocess.STDOUT, start_new_session=True)
        sampler.add_root(job.pid, "cdckit command")
        try:
            time.sleep(20)   # the job's start (Spark, the first batch)
            with sampler.phase("cdckit"):
                result["cdckit_update_latency_s"] = latency(dsn, table, s.search_url, f"cdckit-{prefix}", args.rate,
                                                            args.duration, args.warmup)
                result["cdckit_deletes"] = deletes(dsn, table, s.search_url, f"cdckit-{prefix}", cdckit_deleted,
                                                   args.deletes, args.delete_rounds)
            print(f"cdckit: update latency {result['cdckit_update_latency_s']}; deletes {result['cdckit_deletes']}",
                  flush=True)
        finally:
            stop_job(job)
            job_log.close()
            requests.delete(f"{s.connect_url}/connectors/{prefix}-postgres", timeout=30)
    result["cpu_s"] = {"pgsync": sampler.cpu_s.get("pgsync", {}), "cdckit": sampler.cpu_s.get("cdckit", {})}
    result["own_cpu_s"] = {"pgsync": own_cpu(result["cpu_s"]["pgsync"], PGSYNC_OWN),
                           "cdckit": own_cpu(result["cpu_s"]["cdckit"], CDCKIT_OWN),
                           "cdckit_with_connect_and_broker": own_cpu(result["cpu_s"]["cdckit"], CDCKIT_WITH_SOURCE)}
    p, c = result["pgsync_update_latency_s"], result["cdckit_update_latency_s"]
    pd_, cd = result["pgsync_deletes"].get("all_gone_s"), result["cdckit_deletes"].get("all_gone_s")
    own = result["own_cpu_s"]
    result["ratios"] = {"initial_sync_cdckit_vs_pgsync": round(result["cdckit_initial_sync_s"]
                                                               / result["pgsync_initial_sync_s"], 2),
                        "update_p50_cdckit_vs_pgsync": round(c["p50"] / p["p50"], 2) if p.get("p50") else None,
                        "update_p99_cdckit_vs_pgsync": round(c["p99"] / p["p99"], 2) if p.get("p99") else None,
                        "deletes_cdckit_vs_pgsync": round(cd / pd_, 2) if pd_ and cd else None,
                        "own_cpu_cdckit_vs_pgsync": round(own["cdckit"] / own["pgsync"], 2) if own["pgsync"] else None,
                        "cpu_with_connect_and_broker_vs_pgsync": (round(own["cdckit_with_connect_and_broker"]
                                                                        / own["pgsync"], 2) if own["pgsync"] else None)}
    write_result("beside_pgsync", result)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
