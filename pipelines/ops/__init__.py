"""The operational commands' work: verify, status, dead letters, snapshot, connector, preflight,
watch. Bootstrap and rebuild have homes of their own (pipelines/bootstrap, pipelines/rebuild)."""
