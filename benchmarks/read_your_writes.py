"""Read-your-writes (issue #23): how long a client that commits and then waits for its own commit
(`pipelines/client.wait_visible`) waits, per store, under a background load, beside the freshness
of the same run (pollers on hot rows of the load, as benchmarks/freshness.py measures it).

    .venv/bin/python benchmarks/read_your_writes.py [--rate 2000] [--duration 30] [--clients 8]

Each client loops: update its own row, commit, token (pg_current_wal_lsn() after the commit),
wait until the store's published position reaches it, read the row back (a miss is counted);
half the clients wait on the cache, half on the search index.
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import ROOT, bench_stack, scratch_dir, write_result  # noqa: E402
from benchmarks.freshness import HOT, WATCHED, Load, Poller  # noqa: E402
from benchmarks.freshness_report import percentiles  # noqa: E402

ROWS = 20_000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=int, default=2000, help="background commits/s")
    ap.add_argument("--duration", type=float, default=30)
    ap.add_argument("--warmup", type=float, default=10)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--partitions", type=int, default=3)
    args = ap.parse_args()
    import psycopg
    import redis
    import requests
    import yaml

    from pipelines.client import Watermarks, commit_token, wait_visible

    tmp = scratch_dir("cdckit-ryw-")
    with bench_stack() as s:
        prefix = f"w{uuid.uuid4().hex[:6]}"
        table = f"public.{prefix}_orders"
        dsn = dict(host="127.0.0.1", port=s.ports["postgres"], dbname="cdckit", user="postgres")
        with psycopg.connect(**dsn, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, customer text, amount numeric(12,2), seq bigint, "
                         "updated_at timestamptz)")
            conn.execute(f"INSERT INTO {table} SELECT g, 'customer ' || g, g * 1.5, 0, now() "
                         f"FROM generate_series(1, {ROWS}) g")
        config = {
            "topic_prefix": prefix, "metrics_port": 29765,
            "postgres": {"host": "127.0.0.1", "port": s.ports["postgres"], "user": "postgres", "database": "cdckit",
                         "sslmode": "disable", "slot": prefix, "publication": prefix},
            "kafka": {"bootstrap_servers": s.bootstrap_servers, "partitions": args.partitions},
            "connect": {"url": s.connect_url, "heartbeat_interval_ms": 1000, "timeout_s": 30},
            "tables": [{"name": table, "index": prefix, "redis_key": f"{prefix}:{{id}}"}],
            "search": {"kind": "opensearch", "url": s.search_url, "index_settings": {"number_of_replicas": 0}},
            "redis": {"url": s.redis_url},
            "spark": {"checkpoint_dir": str(tmp / "ckpt")},   # the default trigger: what a user gets
        }
        path = tmp / "cdckit.yaml"
        path.write_text(yaml.safe_dump(config))
        cdckit = [sys.executable, "-m", "pipelines.cli"]
        log = tmp / "job.log"
        r = redis.Redis.from_url(s.redis_url)
        marks = Watermarks(r, s.search_url, prefix)
        job = None
        result: dict = {"rate": args.rate, "clients": args.clients, "partitions": args.partitions,
                        "duration_s": args.duration}
        try:
            subprocess.run([*cdckit, "bootstrap", "--once", "-c", str(path)], cwd=ROOT, check=True,
                           stdout=open(log, "ab"), stderr=subprocess.STDOUT)
            job = subprocess.Popen([*cdckit, "run", "-c", str(path)], cwd=ROOT, stdout=open(log, "ab"),
                                   stderr=subprocess.STDOUT, start_new_session=True)
            with psycopg.connect(**dsn, autocommit=True) as conn:
                wait_visible(commit_token(conn), "both", timeout=120, watermarks=marks)
            Load(dsn, table, args.rate).run(args.warmup)
            load = Load(dsn, table, args.rate)
            keys = random.Random(3).sample(range(1, HOT + 1), WATCHED)
            pollers = {"cache": Poller(lambda ks: {k: json.loads(v)["seq"] if v else None for k, v in
                                                   zip(ks, r.mget([f"{prefix}:{k}" for k in ks]))}, keys, 0.05,
                                       load.committed)}
            waits: dict[str, list[float]] = {"cache": [], "search": []}
            misses = {"cache": 0, "search": 0}
            stop = threading.Event()

            def client(n: int) -> None:
                store = "cache" if n % 2 == 0 else "search"
                row = ROWS - n
                with psycopg.connect(**dsn) as conn:
                    while not stop.is_set():
                        seq = conn.execute(f"UPDATE {table} SET seq = seq + 1 WHERE id = %s RETURNING seq",
                                           (row,)).fetchone()[0]
                        conn.commit()
                        token = commit_token(conn)
                        waits[store].append(wait_visible(token, store, timeout=60, watermarks=marks))
                        if store == "cache":
                            got = json.loads(r.get(f"{prefix}:{row}"))["seq"]
                        else:
                            hits = requests.post(f"{s.search_url}/{prefix}/_search", timeout=10, json={
                                "query": {"ids": {"values": [str(row)]}}}).json()["hits"]["hits"]
                            got = hits[0]["_source"]["seq"] if hits else None
                        misses[store] += int(got != seq)

            threads = [threading.Thread(target=p.run, daemon=True) for p in pollers.values()]
            threads += [threading.Thread(target=client, args=(n,), daemon=True) for n in range(args.clients)]
            for t in threads:
                t.start()
            achieved = load.run(args.duration)
            stop.set()
            for p in pollers.values():
                p.stop.set()
            for t in threads:
                t.join(90)
            result.update({
                "commits_per_s": round(achieved),
                "wait_visible": {store: {**percentiles(w), "n": len(w), "misses": misses[store]}
                                 for store, w in waits.items()},
                "freshness_cache": {**percentiles(pollers["cache"].latencies), "n": len(pollers["cache"].latencies)},
            })
        finally:
            if job is not None and job.poll() is None:
                job.terminate()
                job.wait(60)
            requests.delete(f"{s.connect_url}/connectors/{prefix}-postgres", timeout=30)
    write_result("read_your_writes", result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
