"""`cdckit index show TABLE`: the index definition cdckit would create beside the live one."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from pipelines.cli.base import app, config_option, json_option, load, print_json, say

DIFFERENT_EXIT = 1  # like `verify`: the live index differs from the config (0: no difference)


@app.group("index")
def index_group() -> None:
    """The search index definitions: derived from the column types and the config."""


@index_group.command("show")
@click.argument("table")
@config_option
@json_option
def index_show(table: str, config_path: Path, as_json: bool) -> None:
    """The definition cdckit would create for TABLE (schema.table), the live one behind its alias,
    and the differences, one a line. Exit 1 when they differ (a rebuild applies the config's)."""
    from pipelines.errors import ConfigError
    from pipelines.ops.index_comparison import compare

    cfg = load(config_path)
    if table not in {t.name for t in cfg.flat_tables}:
        raise ConfigError("tables", f"{table} is not a table of the config with an index of its own")
    [c] = compare(cfg, [table])
    if as_json:
        print_json(c.as_json())
    else:
        say(f"{c.table}: the definition from the config and the catalog")
        say(json.dumps(c.wanted, indent=2, sort_keys=True))
        say(f"live: {c.index or '(none)'} behind alias {c.alias}")
        if c.live is not None:
            say(json.dumps(c.live, indent=2, sort_keys=True))
        for line in c.differences:
            say(f"differs: {line}")
        say(f"{len(c.differences)} difference(s): `cdckit rebuild search --table {c.table}` applies the config's"
            if c.differences else "no difference")
    sys.exit(DIFFERENT_EXIT if c.differences else 0)
