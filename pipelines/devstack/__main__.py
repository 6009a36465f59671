"""`python -m pipelines.devstack up|down|status` (scripts/devstack): the local stack of real servers."""
from __future__ import annotations

import dataclasses
import sys

import click
from rich.console import Console
from rich.table import Table

from pipelines.devstack import stack
from pipelines.devstack.packages import MissingPackage
from pipelines.devstack.settings import StackSettings

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def say(text: str) -> None:
    out.print(text, highlight=False, markup=False)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def devstack() -> None:
    """The local stack of real servers on loopback ports (no Docker needed)."""


@devstack.command("up")
@click.option("--with-monitoring", is_flag=True,
              help="also start Prometheus (Debian's binary) scraping the pipeline's metrics with "
                   "compose/monitoring/alerts.yml (or CDCKIT_DEVSTACK_MONITORING=1)")
@click.option("--spark-cluster", is_flag=True,
              help="also start a Spark standalone master and two workers (1 core, 2 GiB each) for "
                   "`spark.master: spark://127.0.0.1:57077` (or CDCKIT_DEVSTACK_SPARK_CLUSTER=1)")
def devstack_up(with_monitoring: bool, spark_cluster: bool) -> None:
    """Start the five servers (idempotent) and wait until each answers."""
    settings = StackSettings()
    if with_monitoring:
        settings = dataclasses.replace(settings, monitoring=True)
    if spark_cluster:
        settings = dataclasses.replace(settings, spark_cluster=True)
    say(f"local stack in {settings.state_dir}")
    stack.up(settings, say=say)
    show(stack.status(settings))
    if settings.spark_cluster:
        from pipelines.devstack.spark_cluster import worker_python

        say(f"Spark cluster: in the config, spark: {{master: {settings.spark_master_url}, conf: "
            f"{{spark.pyspark.python: {worker_python(settings)}}}}}")


@devstack.command("down")
def devstack_down() -> None:
    """Stop exactly the processes `up` started."""
    stack.down(StackSettings(), say=say)


@devstack.command("status")
def devstack_status() -> None:
    """Which servers run and answer. Exit 1 unless all five (and a started Prometheus) are healthy."""
    states = stack.status(StackSettings())
    show(states)
    sys.exit(0 if all(s.healthy for s in states) else 1)


def show(states) -> None:
    table = Table("server", "runs", "endpoint", "pid", "state", "log")
    for s in states:
        table.add_row(s.name, s.version, s.endpoint, str(s.pid or "-"),
                      "healthy" if s.healthy else ("not answering" if s.pid else "stopped"), s.log)
    out.print(table)


def main(argv: list[str] | None = None) -> int:
    """The command's exit code; a stack that cannot start is one line on stderr (`status` exits itself)."""
    try:
        code = devstack.main(args=argv, prog_name="scripts/devstack", standalone_mode=False)
    except click.exceptions.Abort:
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except (MissingPackage, stack.DevstackError) as exc:
        err.print(f"error: {exc}", highlight=False, markup=False)
        return 1
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
