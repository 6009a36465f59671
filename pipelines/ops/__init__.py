"""The operational commands' work: verify, status, dead letters, snapshot, connector, preflight,
watch, the live index beside the config's definition. Bootstrap and rebuild have homes of their own
(pipelines/bootstrap, pipelines/rebuild)."""
