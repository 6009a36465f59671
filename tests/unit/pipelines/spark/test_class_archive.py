"""The driver JVM's class archive: named after the Java and Spark it belongs to, mapped only when
it is there, and a JVM started by cdckit really maps it."""
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from pipelines.spark import class_archive


@pytest.fixture
def archive_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CDCKIT_CLASS_ARCHIVE_DIR", str(tmp_path))
    monkeypatch.delenv("CDCKIT_CLASS_ARCHIVE", raising=False)
    return tmp_path


def _java_tool(name: str) -> str:
    home = os.environ.get("JAVA_HOME")
    return os.path.join(home, "bin", name) if home else (shutil.which(name) or name)


def test_no_archive_no_option(archive_dir):
    assert class_archive.archive_file().parent == archive_dir
    assert class_archive.driver_java_options() == ""


def test_an_archive_is_mapped_quietly(archive_dir):
    path = class_archive.archive_file()
    path.write_bytes(b"x")
    options = class_archive.driver_java_options()
    assert options.startswith(f"-XX:SharedArchiveFile={path} ") and "-Xlog:cds=off" in options


def test_a_path_with_spaces_is_quoted_for_sparks_split(tmp_path, monkeypatch):
    spaced = tmp_path / "my cache"
    spaced.mkdir()
    monkeypatch.setenv("CDCKIT_CLASS_ARCHIVE_DIR", str(spaced))
    path = class_archive.archive_file()
    path.write_bytes(b"x")
    assert shlex.split(class_archive.driver_java_options())[0] == f"-XX:SharedArchiveFile={path}"


def test_off_leaves_it_out(archive_dir, monkeypatch):
    class_archive.archive_file().write_bytes(b"x")
    monkeypatch.setenv("CDCKIT_CLASS_ARCHIVE", "off")
    assert class_archive.driver_java_options() == ""


def test_no_home_no_archive_and_no_error(monkeypatch):
    for name in ("CDCKIT_CLASS_ARCHIVE_DIR", "XDG_CACHE_HOME", "CDCKIT_CLASS_ARCHIVE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(os.path, "expanduser", lambda p: p)
    assert class_archive.archive_file() is None
    assert class_archive.driver_java_options() == ""


def test_an_unreadable_place_is_no_archive(archive_dir, monkeypatch):
    def refused(path):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(class_archive.os.path, "isfile", refused)
    assert class_archive.driver_java_options() == ""


def test_another_spark_java_or_install_finds_none(archive_dir, monkeypatch, tmp_path):
    import pyspark

    first = class_archive.archive_file()
    monkeypatch.setattr(pyspark, "__version__", "0.0.1")
    assert class_archive.archive_file() != first
    monkeypatch.undo()
    monkeypatch.setenv("CDCKIT_CLASS_ARCHIVE_DIR", str(archive_dir))
    # The same pyspark installed again (another venv, a reinstall): its jars' times differ.
    jar = next((Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    real_stat = Path.stat

    def newer(self, *a, **k):
        st = real_stat(self, *a, **k)
        if self == jar:
            return os.stat_result((*st[:8], st.st_mtime + 60, st.st_ctime))
        return st

    monkeypatch.setattr(Path, "stat", newer)
    assert class_archive.archive_file() != first
    monkeypatch.undo()
    monkeypatch.setenv("CDCKIT_CLASS_ARCHIVE_DIR", str(archive_dir))
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    assert class_archive.archive_file() != first


def test_spark_conf_maps_it_before_the_users_options_and_not_under_spark_submit(archive_dir, monkeypatch,
                                                                                 tmp_path):
    from pipelines.config import parse_config
    from pipelines.spark import session
    from tests.support.configs import with_

    path = class_archive.archive_file()
    path.write_bytes(b"x")
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    cfg = parse_config(with_("spark", {"checkpoint_dir": str(tmp_path / "ckpt"),
                                       "conf": {"spark.driver.extraJavaOptions": "-Dfoo=1"}}))
    options = dict(session.spark_conf(cfg, []).getAll())["spark.driver.extraJavaOptions"]
    log4j, archive, *rest = options.split(" -")
    assert log4j.startswith("-Dlog4j2.configurationFile=") and archive == f"XX:SharedArchiveFile={path}"
    assert options.endswith(" -Dfoo=1")
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")
    assert "SharedArchiveFile" not in dict(session.spark_conf(cfg, []).getAll())["spark.driver.extraJavaOptions"]


def test_a_damaged_archive_only_costs_the_gain(archive_dir):
    """The JVM starts with an archive that is not one (-Xshare:auto): nothing to refuse."""
    class_archive.archive_file().write_bytes(b"\0" * 4096)
    done = subprocess.run([_java_tool("java"), *shlex.split(class_archive.driver_java_options()), "-version"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "SharedArchiveFile" not in done.stderr and "cds" not in done.stderr.lower()


def test_the_driver_maps_the_archive_setup_built(spark):
    """scripts/setup built it; the test session's JVM was started with cdckit's options."""
    if class_archive._off():
        pytest.skip("CDCKIT_CLASS_ARCHIVE=off")
    path = class_archive.archive_file()
    if path is None or not path.is_file():
        pytest.fail(f"no class archive at {path}: scripts/setup builds it (python -m pipelines.spark.class_archive)")
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    info = subprocess.run([_java_tool("jcmd"), str(pid), "VM.info"], capture_output=True, text=True,
                          timeout=60).stdout
    mapped = re.search(r"CDS archive\(s\) mapped at: .*?size (\d+)", info)
    assert mapped, info[:2000]
    # The JDK's own archive alone is ~13 MB; mapped, the driver's classes add the file's size.
    assert int(mapped.group(1)) >= Path(path).stat().st_size


def test_pruning_keeps_the_newest_archives_and_live_parts(tmp_path):
    import time

    now = time.time()
    for i in range(5):
        f = tmp_path / f"spark-driver-{i}.jsa"
        f.write_bytes(b"x")
        os.utime(f, (now - i * 100, now - i * 100))
    stale, fresh = tmp_path / "spark-driver-9.jsa.1.part", tmp_path / "spark-driver-9.jsa.2.part"
    for f, age in ((stale, 7200), (fresh, 10)):
        f.write_bytes(b"x")
        os.utime(f, (now - age, now - age))
    class_archive._prune(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "spark-driver-0.jsa", "spark-driver-1.jsa", "spark-driver-2.jsa", fresh.name]
