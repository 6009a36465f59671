"""Events/s of a large replay into each store, three ways over the same topic in the same run: the
Spark job with the project's Python Kafka source (`spark.kafka_source: python`, `cdckit_kafka`), the
Spark job with Spark's built-in JVM `kafka` source (`spark.kafka_source: jvm`, spark-sql-kafka-0-10),
and a plain confluent-kafka consumer applying the same logic (pipelines/spark/partition_apply.py).

    .venv/bin/python benchmarks/sync_throughput.py [--events 300000] [--keys 100000] [--search-events 60000]
                                                   [--partitions 3] [--sources python,jvm]

Target (issue #3): Spark (Python source) reaches at least 0.9x the plain consumer into Redis.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import bench_stack, scratch_dir, create_bench_table, synthetic_topic, write_result  # noqa: E402


SOURCES = ("python", "jvm")


def parse_sources(text: str) -> list[str]:
    """`--sources python,jvm` -> ['python', 'jvm'] (Spark's Kafka source per run; order kept)."""
    sources = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in sources if s not in SOURCES]
    if unknown or not sources or len(set(sources)) != len(sources):
        raise SystemExit(f"--sources: a comma-separated subset of {','.join(SOURCES)}, got {text!r}")
    return sources


def config_for(settings, topic: str, tmp: Path, only: str, trigger: str = "available_now", source: str = "python"):
    """A config over one topic with a fresh index, Redis key prefix and checkpoint dir on every call."""
    from pipelines.config import parse_config

    prefix, table = topic.split(".", 1)
    return parse_config({
        "topic_prefix": prefix,
        "postgres": {"host": "127.0.0.1", "port": settings.ports["postgres"], "database": "cdckit", "user": "postgres"},
        "kafka": {"bootstrap_servers": settings.bootstrap_servers},
        "connect": {"url": settings.connect_url},
        "tables": [{"name": table, "index": f"b{uuid.uuid4().hex[:8]}", "redis_key": f"b{uuid.uuid4().hex[:6]}:{{id}}"}],
        "search": {"kind": "opensearch", "url": settings.search_url, "index_settings": {"number_of_replicas": 0}, "bulk_chunk": 2000},
        "redis": {"url": settings.redis_url},
        "spark": {"checkpoint_dir": str(tmp / uuid.uuid4().hex), "trigger": trigger, "kafka_source": source},
        "sinks": ["cache" if only == "redis" else "search"],
    })


def plain_consumer(config, topic: str, partitions: int) -> float:
    """One process: read each partition to its end with confluent-kafka and apply it with the
    job's own per-partition function; events/s."""
    from pipelines.apply.stores import stores_from_config
    from connectors.kafka.dead_letter_topic import DeadLetterWriter
    from connectors.kafka.offsets import end_offsets
    from connectors.kafka.ranges import KafkaRange, close_readers, read_range
    from pipelines.spark.partition_apply import apply_partition

    stores = stores_from_config(config)
    for t in stores.search_tables.values():
        stores.search.prepare(t)
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
    from pipelines.streaming import job
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
    ap.add_argument("--sources", default="python,jvm",
                    help="Spark's Kafka source(s) to measure beside the plain consumer: python (cdckit_kafka), "
                         "jvm (the built-in kafka source; needs the spark-sql-kafka jar from scripts/setup)")
    args = ap.parse_args()
    sources = parse_sources(args.sources)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    
    from pipelines.spark.session import spark_session

    tmp = scratch_dir("cdckit-bench-")
    with bench_stack() as settings:
        results = {}
        for only, events, keys in (("redis", args.events, args.keys),
                                   ("search", args.search_events, args.search_events // 3)):
            t0 = time.perf_counter()
            topic = synthetic_topic(settings.bootstrap_servers, events, keys, args.partitions)
            print(f"[{only}] produced {events} events in {time.perf_counter() - t0:.1f} s", flush=True)
            # Before typed documents: no table in the catalog, so rows pass as Debezium rendered them.
            create_bench_table(settings, present=False)
            untyped = plain_consumer(config_for(settings, topic, tmp, only), topic, args.partitions)
            print(f"[{only}] plain consumer, untyped documents: {untyped:,.0f} events/s", flush=True)
            create_bench_table(settings)  # from here on documents are typed by the table's column types
            plain = plain_consumer(config_for(settings, topic, tmp, only), topic, args.partitions)
            print(f"[{only}] plain consumer: {plain:,.0f} events/s ({plain / untyped:.2f}x untyped)", flush=True)
            t0 = time.perf_counter()
            # One session for both sources: it registers cdckit_kafka and has the built-in source's
            # jars on its class path (spark_session adds them whenever they are fetched).
            spark = spark_session(config_for(settings, topic, tmp, only, source=sources[0]))
            session_s = time.perf_counter() - t0
            # Warm up the session (JIT, Python workers) on a small topic, as a long-running job is;
            # each source gets its own warm-up replay (its own classes, consumers, code paths).
            warm = synthetic_topic(settings.bootstrap_servers, 5_000, 1_000, args.partitions)
            row = {"events": events, "keys": keys, "plain_events_per_s": round(plain),
                   "plain_untyped_events_per_s": round(untyped), "typed_vs_untyped_plain": round(plain / untyped, 3),
                   "spark_session_start_s": round(session_s, 1)}
            for source in sources:
                spark_job(spark, config_for(settings, warm, tmp, only, source=source))
                rate, records = spark_job(spark, config_for(settings, topic, tmp, only, source=source))
                print(f"[{only}] spark job, {source} source: {rate:,.0f} events/s ({rate / plain:.2f}x plain)",
                      flush=True)
                row[f"{source}_events_per_s"] = round(rate)
                row[f"{source}_vs_plain"] = round(rate / plain, 3)
                row[f"{source}_records_with_tombstones"] = records
            if {"python", "jvm"} <= set(sources):
                row["jvm_vs_python"] = round(row["jvm_events_per_s"] / row["python_events_per_s"], 3)
            print(f"[{only}] session start {session_s:.1f} s, not counted", flush=True)
            results[only] = row
        print()
        print(f"{'store':<8}{'events':>9}" + "".join(f"{s + ' source':>15}" for s in sources)
              + f"{'plain':>10}" + "".join(f"{s + '/plain':>14}" for s in sources))
        for only, row in results.items():
            print(f"{only:<8}{row['events']:>9,}" + "".join(f"{row[f'{s}_events_per_s']:>15,}" for s in sources)
                  + f"{row['plain_events_per_s']:>10,}" + "".join(f"{row[f'{s}_vs_plain']:>13.2f}x" for s in sources))
        print("(events/s; target: python source >= 0.9x plain into redis)", flush=True)
        write_result("sync_throughput", {"partitions": args.partitions, "sources": sources, "results": results})
        spark.stop()  # before the stack goes down (at exit, Spark's worker daemon SIGHUPs its process group)


if __name__ == "__main__":
    main()
