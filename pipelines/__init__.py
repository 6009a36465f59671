"""Wiring: config, the Spark Kafka source, the streaming job, orchestration and the CLI."""
