"""Spark's Real-Time Mode beside the micro-batch trigger, on this machine (issue #40, item 3).

Real-Time Mode (Spark 4.1+, `writeStream.trigger(realTime=...)`: long-running tasks, one per
Kafka partition, the duration a checkpoint interval) accepts stateless queries writing through a
ForeachWriter only: no foreachBatch, no mapPartitions/mapInArrow. cdckit's apply is a batch
function (a partition's slice reduced per key, TOAST columns read in one query, truncates applied by
the driver after every task of the batch, snapshot fences saved per batch, letters with their
batch): this measures what the mode gives a per-record writer, so the gap is known before the
apply is reshaped for it.

The same query (Spark's built-in Kafka source, a Python ForeachWriter doing one versioned Redis
write per record, as cdckit's cache does) runs twice on one topic and one load: with
`trigger(realTime=...)` and with `trigger(processingTime="500 milliseconds")`. Each record carries its
production time; the writer records now minus that, per record, in Redis. Either mode failing to
start is a result too (its error is in the JSON).

    .venv/bin/python benchmarks/real_time_mode.py [--rate 500] [--duration 30] [--partitions 2]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import bench_stack, write_result  # noqa: E402
from benchmarks.freshness_report import percentiles  # noqa: E402


class VersionedWriter:
    """A ForeachWriter: each record's value SET at its offset as version (a stale one skipped), and
    its latency (now - produced) appended to a Redis list."""

    def __init__(self, redis_url: str, tag: str):
        self.redis_url, self.tag = redis_url, tag

    def open(self, partition_id, epoch_id):
        import redis

        self.r = redis.Redis.from_url(self.redis_url)
        self.script = self.r.register_script(
            "local held = redis.call('GET', KEYS[2]) "
            "if held and tonumber(held) >= tonumber(ARGV[2]) then return 0 end "
            "redis.call('SET', KEYS[1], ARGV[1]) redis.call('SET', KEYS[2], ARGV[2]) return 1")
        self.latencies = []
        return True

    def process(self, row):
        body = json.loads(row.value)
        self.script(keys=[f"{self.tag}:{body['k']}", f"{self.tag}:v:{body['k']}"], args=[row.value, row.offset])
        self.latencies.append(time.time() - body["t"])
        if len(self.latencies) >= 50:
            self._flush()

    def _flush(self):
        if self.latencies:
            self.r.rpush(f"{self.tag}:latency", *self.latencies)
            self.latencies = []

    def close(self, error):
        self._flush()


def produce(bootstrap: str, topic: str, rate: int, seconds: float, keys: int = 2000) -> int:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    sent, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        target = t0 + sent / rate
        delay = target - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        k = sent % keys
        p.produce(topic, key=str(k), value=json.dumps({"k": k, "t": time.time()}))
        p.poll(0)
        sent += 1
    p.flush(30)
    return sent


def run_mode(spark, s, topic: str, mode: str, rate: int, seconds: float, tmp: Path) -> dict:
    import redis

    tag = f"rtm{uuid.uuid4().hex[:6]}"
    r = redis.Redis.from_url(s.redis_url)
    stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", s.bootstrap_servers)
              .option("subscribe", topic).option("startingOffsets", "latest").load()
              .selectExpr("CAST(value AS STRING) AS value", "offset"))
    writer = stream.writeStream.foreach(VersionedWriter(s.redis_url, tag)).outputMode("update") \
        .option("checkpointLocation", str(tmp / f"ckpt-{tag}"))
    writer = writer.trigger(realTime="5 minutes") if mode == "real_time" else writer.trigger(processingTime="500 milliseconds")
    try:
        query = writer.start()
    except Exception as exc:  # noqa: BLE001 - the mode refusing this query is the finding
        return {"mode": mode, "started": False, "error": f"{type(exc).__name__}: {str(exc)[:2000]}"}
    try:
        time.sleep(15)   # tasks launched, consumers assigned, Python workers up
        if query.exception() is not None:
            return {"mode": mode, "started": False, "error": str(query.exception())[:2000]}
        r.delete(f"{tag}:latency")
        sent = produce(s.bootstrap_servers, topic, rate, seconds)
        time.sleep(5)
        values = [float(x) for x in r.lrange(f"{tag}:latency", 0, -1)]
        return {"mode": mode, "started": True, "sent": sent, "written": len(values),
                "latency_s": percentiles(values), "error": str(query.exception())[:2000] if query.exception() else None}
    finally:
        query.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=int, default=500)
    ap.add_argument("--duration", type=float, default=30)
    ap.add_argument("--partitions", type=int, default=2)
    args = ap.parse_args()
    from confluent_kafka.admin import AdminClient, NewTopic
    from pyspark.sql import SparkSession

    from pipelines.spark.kafka_jars import kafka_source_jars

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    tmp = Path(tempfile.mkdtemp(prefix="cdckit-rtm-"))
    with bench_stack() as s:
        topic = f"rtm_{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": s.bootstrap_servers})
        admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(30)
        jars = kafka_source_jars()
        spark = (SparkSession.builder.master(f"local[{max(2, args.partitions)}]").appName("cdckit-rtm")
                 .config("spark.jars", ",".join(str(j) for j in jars)).config("spark.ui.enabled", "false")
                 .config("spark.sql.shuffle.partitions", "2").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        results = []
        for mode in ("real_time", "micro_batch"):
            result = run_mode(spark, s, topic, mode, args.rate, args.duration, tmp)
            print(json.dumps(result), flush=True)
            results.append(result)
        spark.stop()
    write_result("real_time_mode", {"rate": args.rate, "duration_s": args.duration, "partitions": args.partitions,
                                    "pyspark": __import__("pyspark").__version__, "modes": results})


if __name__ == "__main__":
    main()
