"""Source side: Kafka Connect REST, Debezium connector configs, Postgres-side helpers. Never imports Spark."""
