"""The `cdckit` group and what every command shares: the --config option and loading it."""
from __future__ import annotations

from pathlib import Path

import click

config_option = click.option("--config", "-c", "config_path", type=click.Path(path_type=Path),
                             default=Path("cdckit.yaml"), envvar="CDCKIT_CONFIG", show_default=True,
                             help="the YAML config")
json_option = click.option("--json", "as_json", is_flag=True, help="machine-readable output")


def load(path: Path):
    from pipelines.config import load_config

    return load_config(path)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def app() -> None:
    """Keep a search index and a Redis cache in step with PostgreSQL."""
