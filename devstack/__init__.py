"""The local stack: real servers (Postgres, Apache Kafka, Kafka Connect + Debezium, Redis, osmem) on loopback."""
