"""`cdckit run`: the streaming sync, one Structured Streaming query over every change topic.

- job.py                  the query, each micro-batch applied (pipelines/apply does the work), the
                          restarts after a store or the broker went away, the stop after a batch;
- batch_cadence.py        how far apart the batches start: the trigger's interval, a longer one under load;
- restart_pause.py        how long a restart waits (until the store answers again);
- visibility_publisher.py each store's visibility watermark for read-your-writes (the reasoning:
                          connectors/visibility_watermark.py; readers: pipelines/client.py).
Spark's plumbing it stands on (session, Kafka source, the executors' apply) is pipelines/spark/.
"""
