"""Spark's Python workers import the installed pyspark, not the zip Spark puts first on their path."""
import os
import subprocess
import sys
from pathlib import Path

import pyspark

from pipelines.spark.installed_pyspark import PTH_LINE, PTH_NAME, install, prefer_installed_pyspark


def test_only_the_zips_inside_an_installed_pyspark_leave_the_path(tmp_path):
    site = tmp_path / "site-packages"
    (site / "pyspark" / "python" / "lib").mkdir(parents=True)
    ours = [str(site / "pyspark" / "python" / "lib" / z) for z in ("pyspark.zip", "py4j-0.10.9.9-src.zip")]
    cluster = str(tmp_path / "opt" / "spark" / "python" / "lib" / "pyspark.zip")   # a distribution's: kept
    path = [*ours, cluster, str(site), "/usr/lib/python311.zip"]
    assert prefer_installed_pyspark(path) == ours
    assert path == [cluster, str(site), "/usr/lib/python311.zip"]


def test_the_pth_line_is_written_once(tmp_path):
    target = install(tmp_path)
    assert target == tmp_path / PTH_NAME and target.read_text() == PTH_LINE
    before = target.stat().st_mtime_ns
    install(tmp_path)
    assert target.stat().st_mtime_ns == before


def test_a_worker_started_with_sparks_path_imports_the_installed_package():
    """What Spark's own worker start gives (its zip first on PYTHONPATH), in this environment: the
    installed package is imported, which scripts/setup's .pth line arranges."""
    lib = Path(pyspark.__file__).parent / "python" / "lib"
    zips = sorted(str(z) for z in lib.glob("*.zip"))
    assert any(z.endswith("pyspark.zip") for z in zips)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(zips)}
    out = subprocess.run([sys.executable, "-c", "import pyspark; print(pyspark.__file__)"], env=env,
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == pyspark.__file__ and ".zip" not in out
