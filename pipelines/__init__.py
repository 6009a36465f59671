"""Wiring: config, the flows (streaming, bootstrap, rebuild, documents: a package each), the
operational commands, Spark's plumbing and the CLI."""
