"""Spark's plumbing: the session, the Kafka data source, the executors' apply of a partition's
slice, the worker context, metrics and the sources' health. The flows built on it have homes of
their own: pipelines/streaming (`run`), bootstrap, rebuild, documents."""
