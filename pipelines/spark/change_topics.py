"""Reading change topics as a stream, with the config's Kafka source and client settings: the
tables' query (pipelines/streaming/job.py) and the documents' (pipelines/documents/documents_query.py)."""
from __future__ import annotations

import json

from pipelines.config import Config


def topic_reader(spark, config: Config, pattern: str, ranges: bool, starting: dict[str, dict[str, int]] | None = None):
    """A stream reader of the topics matching `pattern` from their start (or, without a checkpoint,
    from `starting`: offsets per topic and partition, the others from their start), with the
    config's Kafka source and client settings. `ranges` (the python source): a batch is offset
    ranges the apply tasks read themselves, at most one task per core, instead of records."""
    fmt = "cdckit_kafka" if config.spark.kafka_source == "python" else "kafka"
    reader = spark.readStream.format(fmt).option("subscribePattern", pattern).option(
        "startingOffsets", starting_option(config, pattern, starting))
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


def starting_option(config: Config, pattern: str, starting: dict[str, dict[str, int]] | None) -> str:
    """`earliest`, or JSON offsets naming every partition that matches now (-2: from its start):
    Spark's own source refuses JSON offsets that leave a subscribed partition out."""
    if not starting:
        return "earliest"
    from connectors.kafka.clients import matching_topics
    from connectors.kafka.offsets import Watermarks

    topics = matching_topics(config.kafka.client_config(), pattern)
    marks = Watermarks(config.kafka.client_config(), topics) if topics else None
    try:
        partitions = marks.partitions() if marks is not None else []
    finally:
        if marks is not None:
            marks.close()
    # Exactly the partitions that exist now: a handed-over topic deleted since is left out.
    out: dict[str, dict[str, int]] = {}
    for t, p in partitions:
        out.setdefault(t, {})[str(p)] = int((starting.get(t) or {}).get(str(p), -2))
    return json.dumps(out)
