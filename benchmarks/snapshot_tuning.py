"""Debezium's initial snapshot into Kafka alone (no pipeline), per connector setting, in one run.

    .venv/bin/python benchmarks/snapshot_tuning.py [--rows 1000000] [--tables 2] [--partitions 3]
        [--settings 10240:1,10240:2,40960:2]

The rows are split over `--tables` tables; each setting (`snapshot_fetch_size:snapshot_max_threads`,
cdckit's `connect.*` fields) gets a fresh connector, slot and topics, and is timed from the
connector's creation until its topics hold every row. The defaults in pipelines/config.py come from
here (figures in benchmarks/README.md).
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

from benchmarks.bootstrap_1m import _drop_earlier_slots, _remove_connector  # noqa: E402
from benchmarks.common import ROOT, bench_stack, scratch_dir, write_result  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--tables", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--settings", default="10240:1,10240:2,40960:2")
    args = ap.parse_args()
    import psycopg
    import yaml

    from connectors.kafka.offsets import end_offsets

    tables = [f"public.snap_tuning_{i}" for i in range(args.tables)]
    tmp = scratch_dir("cdckit-bench-")
    results = []
    with bench_stack() as s:
        dsn = dict(host="127.0.0.1", port=s.ports["postgres"], dbname="cdckit", user="postgres")
        with psycopg.connect(**dsn, autocommit=True) as conn:
            _drop_earlier_slots(conn)
            for t in tables:
                conn.execute(f"DROP TABLE IF EXISTS {t}")
                conn.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, name text, email text, balance numeric(12,2), "
                             f"updated_at timestamptz)")
                conn.execute(f"INSERT INTO {t} SELECT g, 'customer ' || g, 'c' || g || '@example.com', g * 1.5, "
                             f"now() FROM generate_series(1, {args.rows // len(tables)}) g")
                conn.execute(f"VACUUM ANALYZE {t}")
        want = (args.rows // len(tables)) * len(tables)
        for setting in args.settings.split(","):
            fetch, threads = (int(x) for x in setting.split(":"))
            prefix = f"s{uuid.uuid4().hex[:6]}"
            config = {
                "topic_prefix": prefix, "metrics_port": 0,
                "postgres": {"host": "127.0.0.1", "port": s.ports["postgres"], "database": "cdckit",
                             "user": "postgres", "sslmode": "disable", "slot": prefix, "publication": prefix},
                "kafka": {"bootstrap_servers": s.bootstrap_servers, "partitions": args.partitions},
                "connect": {"url": s.connect_url, "snapshot_fetch_size": fetch, "snapshot_max_threads": threads},
                "tables": [{"name": t, "index": f"{prefix}_{i}", "redis_key": f"{prefix}{i}:{{id}}"}
                           for i, t in enumerate(tables)],
                "search": {"kind": "opensearch", "url": s.search_url}, "redis": {"url": s.redis_url},
                "spark": {"checkpoint_dir": str(tmp / prefix)},
            }
            path = tmp / f"{prefix}.yaml"
            path.write_text(yaml.safe_dump(config))
            from pipelines.config import parse_config

            connector = parse_config(config).connector_name
            topics = [f"{prefix}.{t}" for t in tables]
            env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
            try:
                started = time.perf_counter()
                subprocess.run([sys.executable, "-m", "pipelines.cli", "connector", "apply", "-c", str(path)],
                               cwd=ROOT, env=env, check=True, capture_output=True)
                seconds = None
                while time.perf_counter() - started < 600:
                    try:
                        ends = end_offsets({"bootstrap.servers": s.bootstrap_servers}, topics)
                        if sum(int(o) for parts in ends.values() for o in parts.values()) >= want:
                            seconds = time.perf_counter() - started
                            break
                    except Exception:  # noqa: BLE001 - topics not created yet
                        pass
                    time.sleep(0.25)
            finally:
                _remove_connector(s, connector, prefix)
            row = {"snapshot_fetch_size": fetch, "snapshot_max_threads": threads, "rows": want,
                   "tables": len(tables), "seconds": round(seconds, 1) if seconds else None,
                   "rows_per_s": round(want / seconds) if seconds else None}
            results.append(row)
            print(f"fetch {fetch:>6}, threads {threads}: {row['seconds']} s ({row['rows_per_s']:,} rows/s)", flush=True)
        with psycopg.connect(**dsn, autocommit=True) as conn:
            for t in tables:
                conn.execute(f"DROP TABLE IF EXISTS {t}")
    write_result("snapshot_tuning", {"rows": want, "tables": len(tables), "partitions": args.partitions,
                                     "runs": results})


if __name__ == "__main__":
    main()
