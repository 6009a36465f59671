"""The `cdckit` entry point. Every error leaves through `main` as one masked line and its exit code
(pipelines/errors.py); an unexpected one also leaves its full trace in a file the line names."""
from __future__ import annotations

import sys
import traceback

import click

from pipelines.cli import (config, connector, dead_letters, index, rebuild, snapshot, spark_package, sync,  # noqa: F401
                           verify, wait)  # the commands
from pipelines.cli.base import app, say_error
from pipelines.cli.logs import SETTINGS, hoist_global_options
from pipelines.errors import known_errors


def main(argv: list[str] | None = None) -> int:
    from pipelines.cli.logs import setup

    setup()  # before the options are parsed: an early error is formatted too
    argv = hoist_global_options(list(sys.argv[1:] if argv is None else argv))
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
    except KeyboardInterrupt:
        return 130
    except known_errors() as exc:
        trace = getattr(exc, "trace", None)
        where = f" (full trace in {write_trace(trace)}{spark_log()})" if trace else ""
        say_error(f"{exc}{where}")
        if SETTINGS.debug and trace:
            print(trace, file=sys.stderr)
        return getattr(exc, "exit_code", 1)
    except Exception as exc:  # noqa: BLE001 - unknown: its type and message, the trace in a file
        trace = traceback.format_exc()
        if SETTINGS.debug:
            print(trace, file=sys.stderr)
        say_error(f"{type(exc).__name__}: {exc} (full trace in {write_trace(trace)})")
        return 1
    return 0


def spark_log() -> str:
    from pipelines.spark.session import spark_log_path

    path = spark_log_path()
    return f"; Spark's log in {path}" if path else ""


def write_trace(text: str) -> str:
    """The full trace of a failure, kept for a bug report (secret values masked)."""
    from pipelines.secrets import mask
    from pipelines.temp_files import new_file

    path = new_file("trace", "txt")
    path.write_text(mask(text))
    return str(path)


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
