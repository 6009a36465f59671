"""`cdckit bootstrap`: from empty stores to stores consistent with a snapshot, then streaming.

Read in this order:
- steps.py          the command's steps (support tables, connector, the watch on the snapshot);
- bootstrap_bulk.py the snapshot applied in bulk as Debezium writes it (Spark batch tasks).
What a finished bootstrap records (the watermark) is pipelines/state/bootstrap_state.py; the CLI is
pipelines/cli/sync.py; streaming after it is pipelines/streaming/job.py.
"""
