"""The `cdckit` entry point. Every error leaves through `main`, masked and with its exit code
(pipelines/errors.py)."""
from __future__ import annotations

import logging
import sys

import click

from pipelines.cli import config, connector, dead_letters, rebuild, snapshot, sync, verify  # noqa: F401 - commands
from pipelines.cli.base import app
from pipelines.cli.render import say_error
from pipelines.errors import known_errors


def main(argv: list[str] | None = None) -> int:
    from pipelines.secrets import install_log_masking

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    install_log_masking()
    try:
        app.main(args=argv, prog_name="cdckit", standalone_mode=False)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort:
        return 130
    except known_errors() as exc:
        say_error(str(exc))
        return getattr(exc, "exit_code", 1)
    return 0


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
