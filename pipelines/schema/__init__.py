"""The running job's handling of its tables' schema changes: what a change means (plan), the watch
between batches (column_watch), and what it does to the world (actions)."""
