"""The driver JVM's class archive: named after the Java and Spark it belongs to, mapped only when
it is there, and a JVM started by cdckit really maps it."""
import re
import subprocess
from pathlib import Path

import pytest

from pipelines.spark import class_archive


@pytest.fixture
def archive_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CDCKIT_CLASS_ARCHIVE_DIR", str(tmp_path))
    monkeypatch.delenv("CDCKIT_CLASS_ARCHIVE", raising=False)
    return tmp_path


def test_no_archive_no_option(archive_dir):
    assert class_archive.archive_file().parent == archive_dir
    assert class_archive.driver_java_options() == ""


def test_an_archive_is_mapped_quietly(archive_dir):
    path = class_archive.archive_file()
    path.write_bytes(b"x")
    options = class_archive.driver_java_options()
    assert options.startswith(f"-XX:SharedArchiveFile={path} ") and "-Xlog:cds=off" in options


def test_off_leaves_it_out(archive_dir, monkeypatch):
    class_archive.archive_file().write_bytes(b"x")
    monkeypatch.setenv("CDCKIT_CLASS_ARCHIVE", "off")
    assert class_archive.driver_java_options() == ""


def test_another_spark_or_java_finds_none(archive_dir, monkeypatch, tmp_path):
    import pyspark

    first = class_archive.archive_file()
    monkeypatch.setattr(pyspark, "__version__", "0.0.1")
    assert class_archive.archive_file() != first
    monkeypatch.undo()
    monkeypatch.setenv("CDCKIT_CLASS_ARCHIVE_DIR", str(archive_dir))
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    assert class_archive.archive_file() != first


def test_a_damaged_archive_only_costs_the_gain(archive_dir):
    """The JVM starts with an archive that is not one (-Xshare:auto): nothing to refuse."""
    class_archive.archive_file().write_bytes(b"\0" * 4096)
    done = subprocess.run(["java", *class_archive.driver_java_options().split(), "-version"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "SharedArchiveFile" not in done.stderr and "cds" not in done.stderr.lower()


def test_the_driver_maps_the_archive_setup_built(spark):
    """scripts/setup built it; the test session's JVM was started with cdckit's options."""
    path = class_archive.archive_file()
    if not path.is_file():
        pytest.fail(f"no class archive at {path}: scripts/setup builds it (python -m pipelines.spark.class_archive)")
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    info = subprocess.run(["jcmd", str(pid), "VM.info"], capture_output=True, text=True, timeout=60).stdout
    mapped = re.search(r"CDS archive\(s\) mapped at: .*?size (\d+)", info)
    assert mapped, info[:2000]
    # The JDK's own archive alone is ~15 MB; the driver's classes make it the file's size more.
    assert int(mapped.group(1)) >= Path(path).stat().st_size
