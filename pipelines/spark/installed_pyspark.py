"""Python workers import the installed pyspark, not the copy Spark puts first on their path.

Spark starts every Python worker with $SPARK_HOME/python/lib/pyspark.zip (and py4j's zip) first on
PYTHONPATH. For a pip-installed pyspark that zip is a second copy of the installed package, and one
without bytecode: each worker compiles pyspark's modules from source again (~1.7 s of CPU against
~0.65 s for the installed package's, measured for a streaming source's runner). Workers forked by
cdckit's daemon (worker_daemon.py) drop it themselves. Workers Spark starts on their own (a Python
data source's planner and streaming runner) get no module of cdckit's: a `.pth` line in the
environment's site-packages (written by scripts/setup: `python -m pipelines.spark.installed_pyspark`)
drops it at their interpreter's start. It matters beyond the seconds: Spark waits a fixed 10 s for
such a worker to connect back, and on two busy cores the zip's import took longer (a query that
never started).

No imports beyond the standard library's: the `.pth` line runs at every start of the environment's
interpreter, and acts only when a pyspark zip is on the path.
"""
from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

PTH_NAME = "cdckit-installed-pyspark.pth"
PTH_LINE = ("import sys; any(p.endswith('pyspark.zip') for p in sys.path) and "
            "__import__('pipelines.spark.installed_pyspark', fromlist=['_']).prefer_installed_pyspark()\n")
_LIB = f"{os.sep}pyspark{os.sep}python{os.sep}lib{os.sep}"


def prefer_installed_pyspark(path: list[str] | None = None) -> list[str]:
    """The pyspark and py4j zips that lie inside an installed pyspark package taken off `path`
    (sys.path by default); a Spark distribution's zips (a cluster's $SPARK_HOME) stay. Returns
    what was removed."""
    path = sys.path if path is None else path
    removed = [p for p in path if p.endswith(".zip") and _LIB in p
               and os.path.isdir(os.path.join(p.split(f"{os.sep}pyspark{os.sep}python{os.sep}")[0], "pyspark"))]
    for p in removed:
        path.remove(p)
    return removed


def install(site_packages: Path | None = None) -> Path:
    """The `.pth` line written into the environment's site-packages (idempotent)."""
    target = (site_packages or Path(sysconfig.get_paths()["purelib"])) / PTH_NAME
    if not target.exists() or target.read_text() != PTH_LINE:
        target.write_text(PTH_LINE)
    return target


if __name__ == "__main__":
    install()
