"""What runs Spark: the session, the Kafka data source, the streaming job, the executor apply and the rebuild jobs."""
