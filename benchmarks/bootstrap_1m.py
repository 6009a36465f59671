"""Bootstrap of a large table: time from start to both stores synced, rows/s per phase.

    .venv/bin/python benchmarks/bootstrap_1m.py [--rows 1000000] [--partitions 3]

Phases: Debezium's snapshot into Kafka (until the topic holds every row), and the pipeline's
apply into both stores (until the bootstrap watermark is recorded). Target (issue #4): < 2 min.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import ROOT, bench_stack, write_result  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--sinks", default="search,cache", help="stores to write, e.g. 'cache' alone")
    args = ap.parse_args()
    import psycopg
    import yaml

    from connectors.kafka.offsets import end_offsets

    tmp = Path(tempfile.mkdtemp(prefix="cdckit-bench-"))
    with bench_stack() as s:
        prefix = f"b{uuid.uuid4().hex[:6]}"
        table = f"public.{prefix}_t"
        with psycopg.connect(host="127.0.0.1", port=s.ports["postgres"], dbname="cdckit", user="postgres",
                             autocommit=True) as conn:
            t0 = time.perf_counter()
            conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, name text, email text, balance numeric(12,2), "
                         f"updated_at timestamptz)")
            conn.execute(f"INSERT INTO {table} SELECT g, 'customer ' || g, 'c' || g || '@example.com', g * 1.5, "
                         f"now() FROM generate_series(1, {args.rows}) g")
            print(f"loaded {args.rows:,} rows in {time.perf_counter() - t0:.1f} s", flush=True)
        config = {
            "topic_prefix": prefix, "metrics_port": 0, "sinks": args.sinks.split(","),
            "postgres": {"host": "127.0.0.1", "port": s.ports["postgres"], "database": "cdckit", "user": "postgres",
                         "sslmode": "disable", "slot": prefix, "publication": prefix},
            "kafka": {"bootstrap_servers": s.bootstrap_servers, "partitions": args.partitions},
            "connect": {"url": s.connect_url},
            "tables": [{"name": table, "index": prefix, "redis_key": f"{prefix}:{{id}}"}],
            "search": {"kind": "opensearch", "url": s.search_url, "index_settings": {"number_of_replicas": 0}, "bulk_chunk": 5000},
            "redis": {"url": s.redis_url},
            "spark": {"checkpoint_dir": str(tmp / "ckpt"), "trigger": "1 second", "max_offsets_per_trigger": 150_000},
        }
        path = tmp / "cdckit.yaml"
        path.write_text(yaml.safe_dump(config))
        topic = f"{prefix}.{table}"
        in_kafka: dict[str, float] = {}

        def watch_topic(started: float) -> None:
            while True:
                try:
                    end = end_offsets({"bootstrap.servers": s.bootstrap_servers}, [topic]).get(topic, {})
                except Exception:  # noqa: BLE001 - topic not created yet
                    end = {}
                if sum(end.values()) >= args.rows:
                    in_kafka["seconds"] = time.perf_counter() - started
                    break
                time.sleep(0.5)

        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
        started = time.perf_counter()
        watcher = threading.Thread(target=watch_topic, args=(started,), daemon=True)
        watcher.start()
        proc = subprocess.run([sys.executable, "-m", "pipelines.cli", "bootstrap", "--once", "-c", str(path)],
                              cwd=ROOT, env=env, capture_output=True, text=True)
        total = time.perf_counter() - started
        if proc.returncode != 0:
            print(proc.stdout[-3000:], proc.stderr[-3000:])
            raise SystemExit("bootstrap failed")
        watcher.join(5)
        snap = in_kafka.get("seconds")
        print(f"debezium snapshot into kafka: {snap:.1f} s ({args.rows / snap:,.0f} rows/s)" if snap else "")
        print(f"bootstrap to both stores synced: {total:.1f} s ({args.rows / total:,.0f} rows/s); target < 120 s")
        name = "bootstrap_1m" if args.sinks == "search,cache" else f"bootstrap_1m_{args.sinks.replace(',', '_')}"
        write_result(name, {"rows": args.rows, "sinks": args.sinks, "partitions": args.partitions, "total_s": round(total, 1),
                                      "rows_per_s": round(args.rows / total),
                                      "snapshot_into_kafka_s": round(snap, 1) if snap else None,
                                      "snapshot_rows_per_s": round(args.rows / snap) if snap else None,
                                      "target_s": 120, "met": total < 120})


if __name__ == "__main__":
    main()
