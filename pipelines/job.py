"""`cdckit run`: one Structured Streaming query over every change topic, applying each micro-batch
to the search index and the cache. Spark schedules; `apply_batch` does the work."""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from typing import Callable

import orjson

from pipelines.apply_batch import BatchStats, stores_from_config
from pipelines.config import Config
from pipelines.dead_letters import DeadLetterWriter
from pipelines.fences import FenceStore
from pipelines.partition_apply import STATS_DDL, STATS_SCHEMA, _add, apply_partition, executor_fn

log = logging.getLogger("cdckit.job")


def spark_session(config: Config):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(config.spark.master).appName("cdckit")
             .config("spark.sql.shuffle.partitions", str(config.spark.shuffle_partitions))
             .config("spark.ui.enabled", "false")
             .config("spark.sql.streaming.stopGracefullyOnShutdown", "true")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    if config.spark.kafka_source == "python":
        from pipelines.kafka_source import KafkaDataSource

        spark.dataSource.register(KafkaDataSource)
    return spark


def change_stream(spark, config: Config):
    """The change topics as a streaming DataFrame with the kafka source's columns."""
    topics = ",".join(config.topic_for(t) for t in config.tables)
    fmt = "cdckit_kafka" if config.spark.kafka_source == "python" else "kafka"
    reader = spark.readStream.format(fmt).option("subscribe", topics).option("startingOffsets", "earliest")
    for key, value in config.kafka.client_config().items():
        reader = reader.option(f"kafka.{key}", value)
    if config.spark.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(config.spark.max_offsets_per_trigger))
    if fmt == "kafka":
        reader = reader.option("failOnDataLoss", "true")
    return reader.load()


def batch_writer(config: Config, on_batch: Callable[[int, BatchStats], None] | None = None, stores=None):
    """foreachBatch: every Kafka partition's slice is applied on an executor (mapInArrow); the
    driver only gathers the per-partition stats and fences. `stores` (tests, benchmarks) applies on
    the driver instead, through the very same function."""
    setup = stores or stores_from_config(config)
    for table in setup.search_tables.values():
        setup.search.ensure_index(table)
    DeadLetterWriter(config.kafka.client_config(), config.dead_letter_topic)  # creates the topic once
    fences = FenceStore(config.spark.checkpoint_dir)
    config_json = orjson.dumps(config.model_dump(mode="json"))

    def write(df, batch_id: int) -> None:
        started = time.monotonic()
        state = fences.before(batch_id)
        if stores is None:
            out = df.mapInArrow(executor_fn(config_json, state), STATS_DDL).toArrow().to_pylist()
        else:
            dlq = DeadLetterWriter(config.kafka.client_config(), config.dead_letter_topic)
            out = list(apply_partition(df.toArrow().to_batches(), stores, dlq, state))
        stats = BatchStats()
        for row in out:
            state[f"{row['topic']}:{row['partition']}"] = max(state.get(f"{row['topic']}:{row['partition']}", 0),
                                                               row["fence"])
            _add(stats, BatchStats(**{k: row[k] for k in STATS_SCHEMA.names[3:]}))
        fences.save(batch_id, state)
        log.info("batch %d: %d records, search +%d (%d stale), cache +%d (%d stale), %d dead letters, %.2f s",
                 batch_id, stats.records, stats.search_applied, stats.search_stale, stats.cache_applied,
                 stats.cache_stale, stats.dead_letters, time.monotonic() - started)
        if on_batch:
            on_batch(batch_id, stats)

    return write


def start(spark, config: Config, on_batch=None, stores=None):
    writer = (change_stream(spark, config).writeStream.foreachBatch(batch_writer(config, on_batch, stores))
              .option("checkpointLocation", str(config.spark.checkpoint_dir / "query")))
    if config.spark.trigger == "available_now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=config.spark.trigger)
    return writer.queryName("cdckit").start()


def run(config: Config) -> int:
    spark = spark_session(config)
    query = start(spark, config)
    stopping = threading.Event()

    def on_term(signum, _frame):
        log.warning("signal %d: stopping after the current batch", signum)
        stopping.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    while query.isActive:
        if stopping.is_set():
            while query.status.get("isTriggerActive"):
                time.sleep(0.1)
            query.stop()
            break
        query.awaitTermination(1)
    if query.exception():
        log.error("query failed: %s", query.exception())
        return 1
    spark.stop()
    return 0
