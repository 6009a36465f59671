"""The derived stores (search index, cache) and their versioning rules. Never imports Spark or Kafka."""
