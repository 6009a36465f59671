"""`cdckit rebuild`: a store rebuilt from the compacted change topics alone, beside the live one.

Read in this order:
- phases.py      the command: plan, bulk, catch-up, switch, each phase recorded so a rerun resumes;
- spark_jobs.py  the bulk as a Spark batch job, and the catch-up stretch the live job replays;
- switch_gate.py whether the rebuild may switch (its dead letters against what was accepted).
Lower, shared with the live job: the pure fold of one partition (pipelines/apply/rebuild_fold.py)
and the durable state that tells the live job what to write (pipelines/state/rebuild_state.py).
The CLI (pipelines/cli/rebuild.py) only draws it; the live job's side is
pipelines/streaming/job.py (`_rebuild_duty`).
"""
