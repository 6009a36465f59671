"""The local stack (not part of the cdckit package): real servers (Postgres, Apache Kafka, Kafka Connect +
Debezium, Redis, OpenSearch or osmem) on loopback, for development, tests and benchmarks."""
