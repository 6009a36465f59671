"""Events/s into Redis on a Spark standalone cluster with one worker, then two (1 core each), over
the same 6-partition topic in one run; and what each micro-batch costs on the driver.

    .venv/bin/python benchmarks/cluster_scaling.py [--events 300000] [--keys 100000] [--partitions 6]
                                                   [--small-batches 40]

One Spark application (the driver is this process) on the bench stack's master: it first has one
worker; the second worker is started while the application lives, and its executor joins it (as a
worker added to a running job does). Each measured replay is preceded by an unmeasured one of a small
topic, so every executor's Python workers are warm. The driver-side cost per micro-batch comes from
Structured Streaming's progress events of a replay cut into small batches (maxOffsetsPerTrigger):
latestOffset, queryPlanning, walCommit (offset log), commitOffsets (commit log) and addBatch (the
batch's Spark job: scheduling 6 tasks, the tasks, and cdckit's own per-batch work on the driver).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import bench_stack, scratch_dir, synthetic_topic, write_result  # noqa: E402
from benchmarks.sync_throughput import config_for  # noqa: E402

PHASES = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets", "triggerExecution")


def cluster_config(settings, topic: str, tmp: Path, python: Path, **spark):
    config = config_for(settings, topic, tmp, "redis")
    conf = {"spark.pyspark.python": str(python), "spark.executor.memory": "1g"}
    return config.model_copy(update={"spark": config.spark.model_copy(update={
        "master": settings.spark_master_url, "conf": conf, **spark})})


def replay(spark, config) -> tuple[float, int, list[dict]]:
    """(events/s, records, progress events) of one availableNow replay."""
    from pipelines.streaming import job
    applied: list[int] = []
    started = time.perf_counter()
    query = job.start(spark, config, on_batch=lambda _id, stats, _rows: applied.append(stats.records))
    query.awaitTermination()
    seconds = time.perf_counter() - started
    return sum(applied) / seconds, sum(applied), [p for p in query.recentProgress if p.get("numInputRows", 0) > 0]


def executors(spark) -> int:
    return spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1  # minus the driver


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=300_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--small-batches", type=int, default=40, help="micro-batches of the driver-cost replay")
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pipelines.devstack import processes
    from pipelines.devstack.spark_cluster import SparkMaster, SparkWorker, worker_python
    from pipelines.spark.session import spark_session

    tmp = scratch_dir("cdckit-bench-")
    with bench_stack() as settings:
        master, one, two = SparkMaster(settings), SparkWorker(settings, 1), SparkWorker(settings, 2)
        python = worker_python(settings)
        started = []
        try:
            for server in (master, one):
                server.start()
                started.append(server)
                assert processes.wait_until(server.healthy, 120), processes.log_tail(server.log)
            topic = synthetic_topic(settings.bootstrap_servers, args.events, args.keys, args.partitions)
            warm = [synthetic_topic(settings.bootstrap_servers, 12_000, 3_000, args.partitions) for _ in range(2)]
            spark = spark_session(cluster_config(settings, topic, tmp, python))
            rows = {}
            for workers, warm_topic in ((1, warm[0]), (2, warm[1])):
                if workers == 2:
                    two.start()
                    started.append(two)
                    assert processes.wait_until(two.healthy, 120), processes.log_tail(two.log)
                    assert processes.wait_until(lambda: executors(spark) >= 2, 120), "no executor on worker 2"
                replay(spark, cluster_config(settings, warm_topic, tmp, python))
                rate, records, _ = replay(spark, cluster_config(settings, topic, tmp, python))
                rows[workers] = {"events_per_s": round(rate), "records": records, "executors": executors(spark)}
                print(f"[{workers} worker(s), {rows[workers]['executors']} executor(s)] {rate:,.0f} events/s "
                      f"({records} records)", flush=True)
            per_batch = max(1, args.events // 10 // args.small_batches)
            small_topic = synthetic_topic(settings.bootstrap_servers, per_batch * args.small_batches,
                                          per_batch * args.small_batches // 3, args.partitions)
            _, _, progress = replay(spark, cluster_config(settings, small_topic, tmp, python,
                                                          max_offsets_per_trigger=per_batch))
            cost = {k: round(statistics.median(p["durationMs"].get(k, 0) for p in progress)) for k in PHASES}
            cost["batches"] = len(progress)
            cost["records_per_batch"] = per_batch
            cost["driver_only_ms"] = cost["latestOffset"] + cost["queryPlanning"] + cost["walCommit"] + \
                cost["commitOffsets"]
            spark.stop()
        finally:
            for server in reversed(started):
                server.stop()
        ratio = rows[2]["events_per_s"] / rows[1]["events_per_s"]
        print()
        print(f"{'workers':<9}{'executors':>10}{'events/s':>12}")
        for w, r in rows.items():
            print(f"{w:<9}{r['executors']:>10}{r['events_per_s']:>12,}")
        print(f"2 workers / 1 worker: {ratio:.2f}x  ({args.events:,} events, {args.partitions} partitions)")
        print("driver per micro-batch (median ms over %d batches of %d records): %s" % (
            cost["batches"], per_batch, ", ".join(f"{k} {cost[k]}" for k in PHASES)))
        write_result("cluster_scaling", {"events": args.events, "keys": args.keys, "partitions": args.partitions,
                                         "cpus_on_machine": os.cpu_count(), "by_workers": rows,
                                         "two_vs_one": round(ratio, 3), "driver_per_batch_ms": cost,
                                         "run": uuid.uuid4().hex[:8]})


if __name__ == "__main__":
    main()
