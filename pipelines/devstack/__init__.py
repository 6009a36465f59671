"""The local stack: real servers (Postgres, Tansu, Kafka Connect + Debezium, Redis, osmem) on loopback."""
