"""The SparkSession cdckit runs in, with its Kafka source registered."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from pipelines.config import Config
from pipelines.errors import ConfigError


def kafka_source_jars() -> list[Path]:
    """Spark's built-in Kafka source's jars, as scripts/setup fetched them for the local stack
    (pipelines/devstack/jars.py); none where that tooling is not at hand (an installed cdckit)."""
    try:
        from pipelines.devstack.jars import spark_kafka_jars
    except (ImportError, OSError, ValueError):  # not shipped, or its compose/versions.env not beside it
        return []
    return spark_kafka_jars()


def spark_session(config: Config):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    jars = kafka_source_jars()
    if config.spark.kafka_source == "jvm" and not jars:
        raise ConfigError("spark.kafka_source", "'jvm' needs the spark-sql-kafka-0-10 jar, which is not "
                          "fetched (run scripts/setup, or set CDCKIT_JARS_DIR)")
    builder = SparkSession.builder
    if jars:  # Spark's built-in kafka source, for `spark.kafka_source: jvm`
        builder = builder.config("spark.jars", ",".join(str(j) for j in jars))
    spark = (builder.master(config.spark.master).appName("cdckit")
             .config("spark.sql.shuffle.partitions", str(config.spark.shuffle_partitions))
             .config("spark.ui.enabled", "false")
             .config("spark.sql.streaming.stopGracefullyOnShutdown", "true")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    if config.spark.kafka_source == "python":
        from pipelines.spark.kafka_source import KafkaDataSource

        spark.dataSource.register(KafkaDataSource)
    return spark
