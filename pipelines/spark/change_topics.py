"""Reading change topics as a stream, with the config's Kafka source and client settings: the
tables' query (pipelines/spark/job.py) and the documents' (pipelines/spark/documents_query.py)."""
from __future__ import annotations

from pipelines.config import Config


def topic_reader(spark, config: Config, pattern: str, ranges: bool):
    """A stream reader of the topics matching `pattern` from their start, with the config's Kafka
    source and client settings. `ranges` (the python source): a batch is offset ranges the apply
    tasks read themselves, at most one task per core, instead of records."""
    fmt = "cdckit_kafka" if config.spark.kafka_source == "python" else "kafka"
    reader = spark.readStream.format(fmt).option("subscribePattern", pattern).option("startingOffsets", "earliest")
    client = config.kafka.client_config() if fmt == "cdckit_kafka" else config.kafka.java_client_config()
    for key, value in client.items():
        reader = reader.option(f"kafka.{key}", value)
    if config.spark.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(config.spark.max_offsets_per_trigger))
    if fmt == "kafka":
        reader = reader.option("failOnDataLoss", "true")
    elif ranges:
        reader = reader.option("ranges", "true").option("tasks", str(spark.sparkContext.defaultParallelism))
    return reader
