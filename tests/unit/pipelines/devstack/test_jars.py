"""The Maven-resolved jars: cached per pom, found by component, reported as missing otherwise."""
import pytest

from pipelines.devstack import jars
from pipelines.devstack.packages import MissingPackage


def test_a_component_without_its_jars_names_setup(tmp_path, monkeypatch):
    monkeypatch.setenv("CDCKIT_JARS_DIR", str(tmp_path))
    with pytest.raises(MissingPackage, match=r"kafka: the jars of kafka.pom.xml .* \(run scripts/setup\)"):
        jars.component_dir("kafka")
    assert jars.spark_kafka_jars() == []


def test_a_changed_pom_invalidates_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CDCKIT_JARS_DIR", str(tmp_path))
    folder = tmp_path / "kafka"
    folder.mkdir()
    (folder / ".pom-sha256").write_text("not the pom's hash\n")
    with pytest.raises(MissingPackage):
        jars.component_dir("kafka")
    (folder / ".pom-sha256").write_text(jars.pom_hash("kafka") + "\n")
    (folder / "kafka_2.13-4.3.1.jar").write_text("")
    assert jars.component_dir("kafka") == folder
    assert jars.jar_version("kafka", "kafka_2.13") == "4.3.1"


def test_spark_kafka_jars_leave_out_what_pyspark_has():
    names = {j.name for j in jars.spark_kafka_jars()}
    assert any(n.startswith("spark-sql-kafka-0-10_2.13-") for n in names)
    assert any(n.startswith("kafka-clients-") for n in names)
    assert not any(n.startswith(("scala-library-", "hadoop-client-", "slf4j-api-")) for n in names)


def test_a_fresh_checkout_links_the_folder_another_resolved_and_runs_no_maven(tmp_path, monkeypatch):
    monkeypatch.setenv("CDCKIT_JARS_DIR", str(tmp_path / "first"))
    monkeypatch.setenv("CDCKIT_JARS_CACHE", str(tmp_path / "shared"))
    runs = []

    def maven(cmd, **kw):   # stands in for `mvn dependency:copy-dependencies`
        runs.append(cmd)
        out = next(a.split("=", 1)[1] for a in cmd if a.startswith("-DoutputDirectory="))
        import os
        os.makedirs(out)
        open(os.path.join(out, "kafka_2.13-4.3.1.jar"), "w").close()
        return type("Run", (), {"returncode": 0, "stdout": "", "stderr": ""})()

    monkeypatch.setattr(jars.subprocess, "run", maven)
    monkeypatch.setattr(jars, "system_binary", lambda *a: "mvn")
    first = jars.fetch("kafka", say=lambda *_: None)
    assert len(runs) == 1 and (first / "kafka_2.13-4.3.1.jar").is_file()
    # Another checkout: the same pom finds the kept folder; Maven is not run again.
    monkeypatch.setenv("CDCKIT_JARS_DIR", str(tmp_path / "second"))
    second = jars.fetch("kafka", say=lambda *_: None)
    assert len(runs) == 1 and second == tmp_path / "second" / "kafka"
    assert jars.component_dir("kafka") == second and jars.jar_version("kafka", "kafka_2.13") == "4.3.1"
    assert (second / "kafka_2.13-4.3.1.jar").stat().st_ino == (first / "kafka_2.13-4.3.1.jar").stat().st_ino
    # A changed pom is another folder: resolved by Maven again.
    monkeypatch.setattr(jars, "pom_hash", lambda component: "0" * 64)
    monkeypatch.setenv("CDCKIT_JARS_DIR", str(tmp_path / "third"))
    jars.fetch("kafka", say=lambda *_: None)
    assert len(runs) == 2
