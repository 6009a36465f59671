"""Python workers import the installed pyspark, not the copy Spark puts first on their path.

Spark starts every Python worker with $SPARK_HOME/python/lib/pyspark.zip (and py4j's zip) first on
PYTHONPATH. For a pip-installed pyspark that zip is a second copy of the installed package, and one
without bytecode: each worker compiles pyspark's modules from source again (~1.7 s of CPU against
~0.65 s for the installed package's, measured for a streaming source's runner). Workers forked by
cdckit's daemon (worker_daemon.py) drop it themselves. Workers Spark starts on their own (a Python
data source's planner and streaming runner) get no module of cdckit's: a `.pth` line in the
environment's site-packages drops it at their interpreter's start (written by scripts/setup,
`python -m pipelines.spark.installed_pyspark`, and in the local cluster's worker Python). It
matters beyond the seconds: Spark waits a fixed 10 s for such a worker to connect back, and on two
busy cores the zip's import took longer (a query that never started).

The `.pth` line uses nothing but the standard library: it runs at every start of the environment's
interpreter (a few microseconds), and changes only a path holding an installed pyspark's zips.
"""
from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path
from types import SimpleNamespace

PTH_NAME = "cdckit-installed-pyspark.pth"
# The test, once: the `.pth` line runs it as it is, and prefer_installed_pyspark evaluates it over any
# list. Standard library only (a venv without cdckit's package gets the line too: the cluster's worker
# Python, pipelines/devstack/spark_cluster.py). A lambda: names a .pth line binds are not seen by a
# comprehension inside it (site exec()s the line).
_DROP_INSTALLED_ZIPS = (
    "(lambda os, sys, d: sys.path.__setitem__(slice(None), [p for p in sys.path if not ("
    "p.endswith('.zip') and d + 'lib' + os.sep in p and "
    "os.path.isfile(os.path.join(p.split(d)[0], 'pyspark', '__init__.py')))]))"
    "(os, sys, os.sep + 'pyspark' + os.sep + 'python' + os.sep)")
PTH_LINE = f"import os, sys; {_DROP_INSTALLED_ZIPS}\n"


def prefer_installed_pyspark(path: list[str] | None = None) -> list[str]:
    """The pyspark and py4j zips that lie inside an installed pyspark package (a folder with its
    `__init__.py`) taken off `path` (sys.path by default), in place; a Spark distribution's zips (a
    cluster's $SPARK_HOME, even one in a folder named pyspark) stay. Returns what was removed."""
    path = sys.path if path is None else path
    before = list(path)
    eval(_DROP_INSTALLED_ZIPS, {"os": os, "sys": SimpleNamespace(path=path)})  # noqa: S307 - our constant
    return [p for p in before if p not in path]


def install(site_packages: Path | None = None) -> Path:
    """The `.pth` line written into the environment's site-packages (idempotent)."""
    target = (site_packages or Path(sysconfig.get_paths()["purelib"])) / PTH_NAME
    if not target.exists() or target.read_text() != PTH_LINE:
        target.write_text(PTH_LINE)
    return target


if __name__ == "__main__":
    install()
