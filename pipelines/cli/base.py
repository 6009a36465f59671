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


def cdckit_version() -> str:
    """The installed distribution's version; pyproject.toml's in a checkout that is not installed."""
    from importlib import metadata

    try:
        return metadata.version("cdckit")
    except metadata.PackageNotFoundError:
        import tomllib

        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        return tomllib.loads(pyproject.read_text())["project"]["version"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(cdckit_version(), "--version", "-V", prog_name="cdckit", message="%(prog)s %(version)s")
@click.option("--verbose", is_flag=True, envvar="CDCKIT_VERBOSE", help="Spark's and the clients' warnings too")
@click.option("--debug", is_flag=True, envvar="CDCKIT_DEBUG", help="tracebacks, and cdckit's debug lines")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text", envvar="CDCKIT_LOG_FORMAT",
              show_default=True, help="json: one object per line, for log shippers")
def app(verbose: bool, debug: bool, log_format: str) -> None:
    """Keep a search index and a Redis cache in step with PostgreSQL.

    The global options may also follow the command (`cdckit run --debug`)."""
    from pipelines.cli.logs import setup

    setup(verbose=verbose, debug=debug, fmt=log_format)
