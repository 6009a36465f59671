"""Spark's Real-Time Mode beside the micro-batch trigger, on this machine (issue #40, item 3).

Real-Time Mode (Spark 4.1+, `writeStream.trigger(realTime=...)`: long-running tasks, one per
Kafka partition, the duration a checkpoint interval) accepts stateless queries writing through a
ForeachWriter only: no foreachBatch, no mapPartitions/mapInArrow, no Python UDF. cdckit's apply is a batch
function (a partition's slice reduced per key, TOAST columns read in one query, truncates applied by
the driver after every task of the batch, snapshot fences saved per batch, letters with their
batch): this measures what the mode gives a per-record writer, so the gap is known before the
apply is reshaped for it.

The same query (Spark's built-in Kafka source, a Python ForeachWriter doing one versioned Redis
write per record, as cdckit's cache does) runs twice, each on a topic of its own and the same load: with
`trigger(realTime=...)` and with `trigger(processingTime="500 milliseconds")`. Each record carries its
production time; the writer records now minus that, per record, in Redis. Either mode failing to
start is a result too (its error is in the JSON).

Two more runs find where the time goes:
- `real_time_jvm_sink`: the records copied to another topic by Spark's own Kafka sink in Real-Time
  Mode (no Python), a consumer here taking now minus the production time: what the mode itself gives.
- `real_time_arrow_udf`: the versioned Redis write done by a scalar Arrow UDF (`--udf-batch` records
  per Arrow batch), its output to a topic by the Kafka sink. Spark 4.3 refuses a Python UDF in the mode
  (ArrowEvalPythonExec is not in its operator allowlist); the check is turned off for this run, which
  also needs small stream buffers to and from the Python worker (`--udf-buffer-size`, a session of its
  own): at Spark's 64 KB the records wait seconds in them. Its batches fill by count, never by time:
  the last records before a pause wait for the next ones (the run's missing count).

The gap between the Python writer and the JVM sink is Spark's Python ForeachWriter
(PythonForeachWriter.scala): it pickles rows for the Python worker with `SerDeUtil.AutoBatchedPickler`,
which doubles its batch after every batch under 1 MB and blocks until the batch is full. Fed 250
records/s a partition, its batches of 1, 2, 4, ... 2,048 records wait up to 8 s each, and the batch of
4,096 never fills in 30 s: `pickler_bound` is the count of records such batches let through (the
writer reports latencies 50 at a time, so up to 49 a partition fewer are seen; a written count that
close to it is all the mode's Python path can do, whatever the CPU).

    .venv/bin/python benchmarks/real_time_mode.py [--rate 500] [--duration 30] [--partitions 2]
        [--modes real_time,micro_batch,real_time_jvm_sink,real_time_arrow_udf] [--udf-batch 20]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import bench_stack, scratch_dir, write_result  # noqa: E402
from benchmarks.freshness_report import percentiles  # noqa: E402


# A record's value SET at its offset as version, a stale one skipped (as cdckit's cache writes).
VERSIONED_SET = ("local held = redis.call('GET', KEYS[2]) "
                 "if held and tonumber(held) >= tonumber(ARGV[2]) then return 0 end "
                 "redis.call('SET', KEYS[1], ARGV[1]) redis.call('SET', KEYS[2], ARGV[2]) return 1")
MODES = ("real_time", "micro_batch", "real_time_jvm_sink", "real_time_arrow_udf")


class VersionedWriter:
    """A ForeachWriter: each record written by VERSIONED_SET, and its latency (now - produced)
    appended to a Redis list."""

    def __init__(self, redis_url: str, tag: str):
        self.redis_url, self.tag = redis_url, tag

    def open(self, partition_id, epoch_id):
        import redis

        self.r = redis.Redis.from_url(self.redis_url)
        self.script = self.r.register_script(VERSIONED_SET)
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


def pickler_bound(records_per_partition: list[int]) -> int:
    """Records a Python ForeachWriter can have handed to its worker when `records_per_partition` came
    in: AutoBatchedPickler's batches of 1, 2, 4, ... records (doubling while under 1 MB, far above
    these records' size), each sent once full: the sum of the batches that filled, per partition."""
    total = 0
    for n in records_per_partition:
        batch, sent = 1, 0
        while sent + batch <= n:
            sent += batch
            batch *= 2
        total += sent
    return total


@dataclass
class Run:
    """One mode's run: its topic and load, and where its latencies land."""
    spark: Any
    s: Any
    topic: str
    partitions: int
    rate: int
    seconds: float
    tmp: Path
    interval: str     # Real-Time Mode's checkpoint interval

    def source(self):
        return (self.spark.readStream.format("kafka").option("kafka.bootstrap.servers", self.s.bootstrap_servers)
                .option("subscribe", self.topic).option("startingOffsets", "latest").load())

    def kafka_sink(self, stream, out: str):
        """`stream` copied to topic `out` by Spark's Kafka sink, in Real-Time Mode."""
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.s.bootstrap_servers})   # (held: the result needs it alive)
        admin.create_topics([NewTopic(out, 1, 1)])[out].result(30)
        return (stream.writeStream.format("kafka").option("kafka.bootstrap.servers", self.s.bootstrap_servers)
                .option("topic", out).option("checkpointLocation", str(self.tmp / f"ckpt-{out}"))
                .outputMode("update").trigger(realTime=self.interval))

    def measure(self, mode: str, writer, latencies: Callable[[], list[float]],
                loading: Callable[[], None] = lambda: None) -> dict:
        """The query started (its refusal is the result), 15 s for its tasks, consumers and Python
        workers to come up, `loading()` then the load, 5 s, then `latencies()`."""
        try:
            query = writer.start()
        except Exception as exc:  # noqa: BLE001 - the mode refusing this query is the finding
            return {"mode": mode, "started": False, "error": f"{type(exc).__name__}: {str(exc)[:2000]}"}
        try:
            time.sleep(15)
            if query.exception() is not None:
                return {"mode": mode, "started": False, "error": str(query.exception())[:2000]}
            loading()
            sent = produce(self.s.bootstrap_servers, self.topic, self.rate, self.seconds)
            time.sleep(5)
            values = latencies()
            return {"mode": mode, "started": True, "sent": sent, "written": len(values),
                    "latency_s": percentiles(values),
                    "error": str(query.exception())[:2000] if query.exception() else None}
        finally:
            query.stop()

    def redis_latencies(self, tag: str) -> tuple[Callable[[], None], Callable[[], list[float]]]:
        """(emptied before the load, read after it): the latencies the writes appended under `tag`."""
        import redis

        r = redis.Redis.from_url(self.s.redis_url)
        return (lambda: r.delete(f"{tag}:latency"),
                lambda: [float(x) for x in r.lrange(f"{tag}:latency", 0, -1)])


def run_writer(run: Run, mode: str) -> dict:
    """The Python ForeachWriter, in Real-Time Mode or with the 500 ms micro-batch trigger."""
    tag = f"rtm{uuid.uuid4().hex[:6]}"
    stream = run.source().selectExpr("CAST(value AS STRING) AS value", "offset")
    writer = stream.writeStream.foreach(VersionedWriter(run.s.redis_url, tag)).outputMode("update") \
        .option("checkpointLocation", str(run.tmp / f"ckpt-{tag}"))
    writer = (writer.trigger(realTime=run.interval) if mode == "real_time"
              else writer.trigger(processingTime="500 milliseconds"))
    clear, read = run.redis_latencies(tag)
    result = run.measure(mode, writer, read, clear)
    if mode == "real_time" and result["started"]:   # (keys spread evenly over the partitions: produce() cycles them)
        sent, parts = result["sent"], run.partitions
        result["pickler_bound"] = pickler_bound([sent // parts + (i < sent % parts) for i in range(parts)])
    return result


def run_jvm_sink(run: Run) -> dict:
    """Real-Time Mode with Spark's Kafka sink (no Python in the path): records copied to a second
    topic; a consumer here takes now minus each record's production time."""
    from confluent_kafka import Consumer

    out = f"{run.topic}_copy"
    writer = run.kafka_sink(run.source().selectExpr("CAST(offset AS STRING) AS key", "value"), out)
    latencies: list[float] = []
    done = threading.Event()

    def consume() -> None:
        c = Consumer({"bootstrap.servers": run.s.bootstrap_servers, "group.id": f"rtm-{out}",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.wait.max.ms": 10})
        c.subscribe([out])
        try:
            while not done.is_set():
                m = c.poll(0.05)
                if m is not None and m.error() is None and m.value():
                    latencies.append(time.time() - json.loads(m.value())["t"])
        finally:
            c.close()

    reader = threading.Thread(target=consume, daemon=True)

    def read() -> list[float]:
        done.set()
        reader.join(10)
        return latencies

    try:
        return run.measure("real_time_jvm_sink", writer, read, reader.start)
    finally:
        done.set()


def run_arrow_udf(run: Run, per_batch: int) -> dict:
    """Real-Time Mode with the versioned Redis write done by a scalar Arrow (pandas) UDF,
    `per_batch` records per Arrow batch (`spark.sql.execution.arrow.maxRecordsPerBatch`), its
    output copied to a topic by Spark's Kafka sink: Python in the path without the ForeachWriter's
    pickler."""
    from pyspark.sql.functions import col, pandas_udf

    tag = f"rtm{uuid.uuid4().hex[:6]}"
    url = run.s.redis_url

    @pandas_udf("string")
    def apply(values, offsets):
        import redis

        import pandas as pd

        r = redis.Redis.from_url(url)
        write = r.register_script(VERSIONED_SET)
        lat = []
        for value, offset in zip(values, offsets):
            body = json.loads(value)
            write(keys=[f"{tag}:{body['k']}", f"{tag}:v:{body['k']}"], args=[value, int(offset)])
            lat.append(time.time() - body["t"])
        if lat:
            r.rpush(f"{tag}:latency", *lat)
        return pd.Series(["ok"] * len(values))

    run.spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(per_batch))
    # Spark 4.3 refuses a Python UDF in this mode (ArrowEvalPythonExec is not in its operator
    # allowlist): the check off, to measure what the path would give.
    run.spark.conf.set("spark.sql.streaming.realTimeMode.allowlistCheck", "false")
    try:
        stream = run.source().select(apply(col("value").cast("string"), col("offset")).alias("value"))
        clear, read = run.redis_latencies(tag)
        return run.measure("real_time_arrow_udf", run.kafka_sink(stream, f"{run.topic}_acks"), read, clear)
    finally:   # (the settings are read while the query runs: unset once it stopped)
        run.spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
        run.spark.conf.unset("spark.sql.streaming.realTimeMode.allowlistCheck")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=int, default=500)
    ap.add_argument("--duration", type=float, default=30)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--udf-buffer-size", type=int, default=256,
                    help="real_time_arrow_udf: spark.buffer.size, the streams to and from Python workers flush "
                         "when this full (at Spark's 65,536 the records wait seconds in them)")
    ap.add_argument("--udf-batch", type=int, default=20, help="real_time_arrow_udf: records per Arrow batch")
    ap.add_argument("--interval", default="5 minutes",
                    help="Real-Time Mode's checkpoint interval: its tasks end and restart this often")
    ap.add_argument("--modes", default="", help=f"comma-separated, of {','.join(MODES)} (default: all)")
    args = ap.parse_args()
    from confluent_kafka.admin import AdminClient, NewTopic
    from pyspark.sql import SparkSession

    from pipelines.spark.kafka_jars import kafka_source_jars

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    tmp = scratch_dir("cdckit-rtm-")
    with bench_stack() as s:
        admin = AdminClient({"bootstrap.servers": s.bootstrap_servers})
        jars = kafka_source_jars()
        results = []
        for mode in MODES if not args.modes else args.modes.split(","):
            # A session per mode: the Python UDF's run needs small stream buffers, which would
            # change the others' (spark.buffer.size is read when the session starts).
            buffer = args.udf_buffer_size if mode == "real_time_arrow_udf" else 65536
            spark = (SparkSession.builder.master(f"local[{max(2, args.partitions)}]").appName("cdckit-rtm")
                     .config("spark.jars", ",".join(str(j) for j in jars)).config("spark.ui.enabled", "false")
                     .config("spark.sql.shuffle.partitions", "2")
                     .config("spark.buffer.size", str(buffer)).getOrCreate())
            spark.sparkContext.setLogLevel("ERROR")
            topic = f"rtm_{uuid.uuid4().hex[:6]}"   # a topic per run: each starts at its end
            admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(30)
            run = Run(spark, s, topic, args.partitions, args.rate, args.duration, tmp, args.interval)
            if mode == "real_time_jvm_sink":
                result = run_jvm_sink(run)
            elif mode == "real_time_arrow_udf":
                result = run_arrow_udf(run, args.udf_batch)
                result.update(records_per_arrow_batch=args.udf_batch, buffer_bytes=buffer)
            else:
                result = run_writer(run, mode)
            print(json.dumps(result), flush=True)
            results.append(result)
            spark.stop()
    write_result("real_time_mode", {"rate": args.rate, "duration_s": args.duration, "partitions": args.partitions,
                                    "pyspark": __import__("pyspark").__version__, "modes": results})


if __name__ == "__main__":
    main()
