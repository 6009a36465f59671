"""The operational commands' work: bootstrap, rebuild, verify, status, dead letters, snapshot, connector, preflight."""
