"""What tests share: the stack they run against, CLI runs and store reads, sample records and configs, the drills' workload and table."""
