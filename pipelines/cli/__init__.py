"""The `cdckit` command line: one module per command group; what they share (the options, loading the
config, printing) in base.py."""
