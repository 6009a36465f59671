"""The `cdckit` command line: one module per command group, rendering in render.py."""
