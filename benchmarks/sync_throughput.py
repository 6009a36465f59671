"""Events/s of a large replay into each store: the Spark job vs a plain confluent-kafka consumer
applying the same logic (pipelines/apply_batch.py), in the same run.

    .venv/bin/python benchmarks/sync_throughput.py [--events 300000] [--search-events 60000]

Target (issue #3): Spark reaches at least 0.9x the plain consumer into Redis.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import bench_stack, synthetic_topic, write_result  # noqa: E402


def config_for(settings, topic: str, tmp: Path, only: str, trigger: str = "available_now"):
    from pipelines.config import parse_config

    prefix, table = topic.split(".", 1)
    return parse_config({
        "topic_prefix": prefix,
        "postgres": {"host": "127.0.0.1", "port": settings.ports["postgres"], "database": "cdckit", "user": "postgres"},
        "kafka": {"bootstrap_servers": settings.bootstrap_servers},
        "connect": {"url": settings.connect_url},
        "tables": [{"name": table, "index": f"b{uuid.uuid4().hex[:8]}", "redis_key": f"b{uuid.uuid4().hex[:6]}:{{id}}"}],
        "search": {"kind": "opensearch", "url": settings.search_url, "bulk_chunk": 2000},
        "redis": {"url": settings.redis_url},
        "spark": {"checkpoint_dir": str(tmp / uuid.uuid4().hex), "trigger": trigger},
        "sinks": ["cache" if only == "redis" else "search"],
    })


def plain_consumer(config, topic: str, partitions: int) -> float:
    """One process: read each partition to its end with confluent-kafka and apply it with the
    job's own per-partition function; events/s."""
    from pipelines.apply_batch import stores_from_config
    from pipelines.dead_letters import DeadLetterWriter
    from pipelines.kafka_source import KafkaRange, close_readers, end_offsets, read_range
    from pipelines.partition_apply import apply_partition

    stores = stores_from_config(config)
    for t in stores.search_tables.values():
        stores.search.ensure_index(t)
    dlq = DeadLetterWriter(config.kafka.client_config(), config.dead_letter_topic)
    end = end_offsets(config.kafka.client_config(), [topic])[topic]
    started = time.perf_counter()
    total, fences = 0, {}
    for p in range(partitions):
        batches = read_range(config.kafka.client_config(), KafkaRange(topic, p, 0, end[str(p)]))
        total += sum(row["records"] for row in apply_partition(batches, stores, dlq, fences))
    rate = total / (time.perf_counter() - started)
    close_readers()
    return rate


def spark_job(spark, config) -> tuple[float, int]:
    from pipelines import job

    applied = []
    started = time.perf_counter()
    query = job.start(spark, config, on_batch=lambda _id, stats, _rows: applied.append(stats.records))
    query.awaitTermination()
    return sum(applied) / (time.perf_counter() - started), sum(applied)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=300_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--search-events", type=int, default=60_000)
    ap.add_argument("--partitions", type=int, default=3)
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import tempfile

    from pipelines import job

    tmp = Path(tempfile.mkdtemp(prefix="cdckit-bench-"))
    with bench_stack() as settings:
        results = {}
        for only, events, keys in (("redis", args.events, args.keys),
                                   ("search", args.search_events, args.search_events // 3)):
            t0 = time.perf_counter()
            topic = synthetic_topic(settings.bootstrap_servers, events, keys, args.partitions)
            print(f"[{only}] produced {events} events in {time.perf_counter() - t0:.1f} s", flush=True)
            plain = plain_consumer(config_for(settings, topic, tmp, only), topic, args.partitions)
            print(f"[{only}] plain consumer: {plain:,.0f} events/s", flush=True)
            t0 = time.perf_counter()
            spark = job.spark_session(config_for(settings, topic, tmp, only))
            session_s = time.perf_counter() - t0
            # Warm up the session (JIT, Python workers) on a small topic, as a long-running job is.
            warm = synthetic_topic(settings.bootstrap_servers, 5_000, 1_000, args.partitions)
            spark_job(spark, config_for(settings, warm, tmp, only))
            spark_rate, records = spark_job(spark, config_for(settings, topic, tmp, only))
            print(f"[{only}] spark job: {spark_rate:,.0f} events/s (session start {session_s:.1f} s, not counted)",
                  flush=True)
            results[only] = {"events": events, "records_with_tombstones": records, "keys": keys, "plain_events_per_s": round(plain),
                             "spark_events_per_s": round(spark_rate), "ratio": round(spark_rate / plain, 3),
                             "spark_session_start_s": round(session_s, 1)}
        print(f"spark/plain into redis: {results['redis']['ratio']:.2f}x (target >= 0.9x); "
              f"into search: {results['search']['ratio']:.2f}x")
        write_result("sync_throughput", {"partitions": args.partitions, "results": results})


if __name__ == "__main__":
    main()
