"""Kafka as cdckit reads and writes it, without Spark: where partitions begin and end, offset ranges
and the consumers that read them, topic administration, and the dead-letter topic."""
