"""The `cdckit` group and what every command shares: the --config option and loading it, and how it
prints: every line for people goes through `say` (secret values masked, no rich markup); `--json`
output is one masked document on stdout."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import click
from rich.console import Console

from pipelines.secrets import mask, print_masked

config_option = click.option("--config", "-c", "config_path", type=click.Path(path_type=Path),
                             default=Path("cdckit.yaml"), envvar="CDCKIT_CONFIG", show_default=True,
                             help="the YAML config")
json_option = click.option("--json", "as_json", is_flag=True, help="machine-readable output")


out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def say(text: str) -> None:
    print_masked(out, text)


def say_error(text: str) -> None:
    print_masked(err, f"error: {text}")


def print_json(body) -> None:
    """One JSON document on stdout (progress went to stderr), masked like everything printed."""
    print(mask(json.dumps(body)), flush=True)


def cut(value, limit: int = 120) -> str:
    """A value for one line of human output: long ones cut, with their length and a hash to tell
    two apart (`--json` keeps them whole)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return f"{text[:limit]}... ({len(text):,} chars, sha256 {digest})"


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
