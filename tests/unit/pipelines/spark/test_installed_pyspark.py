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
    (site / "pyspark" / "__init__.py").write_text("")
    ours = [str(site / "pyspark" / "python" / "lib" / z) for z in ("pyspark.zip", "py4j-0.10.9.9-src.zip")]
    cluster = str(tmp_path / "opt" / "spark" / "python" / "lib" / "pyspark.zip")   # a distribution's: kept
    (tmp_path / "dist" / "pyspark" / "python" / "lib").mkdir(parents=True)     # one in a folder named pyspark
    named = str(tmp_path / "dist" / "pyspark" / "python" / "lib" / "pyspark.zip")
    path = [*ours, cluster, named, str(site), "/usr/lib/python311.zip"]
    assert prefer_installed_pyspark(path) == ours
    assert path == [cluster, named, str(site), "/usr/lib/python311.zip"]


def test_the_pth_line_is_written_once(tmp_path):
    target = install(tmp_path)
    assert target == tmp_path / PTH_NAME and target.read_text() == PTH_LINE
    before = target.stat().st_mtime_ns
    install(tmp_path)
    assert target.stat().st_mtime_ns == before


def _imported_from(pythonpath: list[str], sitedir: Path | None) -> str:
    """Where a Python started with Spark's path (its zips first on PYTHONPATH) imports pyspark from,
    with `sitedir`'s .pth files processed as site-packages' are."""
    code = (f"import site; site.addsitedir({str(sitedir)!r}); " if sitedir else "") + \
        "import pyspark; print(pyspark.__file__)"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(pythonpath)}
    return subprocess.run([sys.executable, "-S", "-c", f"import sys; sys.path.append({_site()!r}); {code}"],
                          env=env, capture_output=True, text=True, check=True).stdout.strip()


def _site() -> str:
    return str(Path(pyspark.__file__).parent.parent)


def test_a_worker_started_with_sparks_path_imports_the_installed_package(tmp_path):
    """The .pth line alone (no cdckit module, as in the cluster's worker Python): without it the
    zip's copy is imported, with it the installed package."""
    lib = Path(pyspark.__file__).parent / "python" / "lib"
    zips = sorted(str(z) for z in lib.glob("*.zip"))
    assert any(z.endswith("pyspark.zip") for z in zips)
    assert ".zip" in _imported_from(zips, None)
    install(tmp_path)
    assert _imported_from(zips, tmp_path) == pyspark.__file__


def test_setup_wrote_the_line_into_this_environment():
    """scripts/setup's step: this environment's interpreter gets it at every start."""
    import sysconfig

    assert (Path(sysconfig.get_paths()["purelib"]) / PTH_NAME).read_text() == PTH_LINE
