"""The running job's handling of its tables' schema changes: what a change means (plan), the watch
between batches (watch), and what it does to the world (actions)."""
