"""Kafka as cdckit reads and writes it, without Spark: the clients and topic administration, where
partitions begin and end, offset ranges, the consumers that read them and the progress board their
tasks report to, and the dead-letter topic."""
