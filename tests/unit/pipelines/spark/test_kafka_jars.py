"""The built-in Kafka source's jars, as the shipped code finds them without the local-stack tooling."""
from pipelines.spark import kafka_jars


def test_a_named_folder_is_taken_as_it_is_minus_what_pyspark_has(tmp_path, monkeypatch):
    (tmp_path / "spark-sql-kafka-0-10_2.13-4.2.0.jar").write_text("")
    (tmp_path / "scala-library-2.13.16.jar").write_text("")   # the wheel has it
    monkeypatch.setenv("CDCKIT_SPARK_KAFKA_JARS", str(tmp_path))
    assert [j.name for j in kafka_jars.kafka_source_jars()] == ["spark-sql-kafka-0-10_2.13-4.2.0.jar"]


def test_setups_folder_counts_once_its_fetch_finished(tmp_path, monkeypatch):
    monkeypatch.delenv("CDCKIT_SPARK_KAFKA_JARS", raising=False)
    monkeypatch.setenv("CDCKIT_JARS_DIR", str(tmp_path))
    folder = tmp_path / "spark-kafka"
    folder.mkdir()
    (folder / "kafka-clients-4.1.0.jar").write_text("")
    assert kafka_jars.kafka_source_jars() == []          # no stamp: a fetch cut short
    (folder / kafka_jars.STAMP).write_text("hash\n")
    assert [j.name for j in kafka_jars.kafka_source_jars()] == ["kafka-clients-4.1.0.jar"]


def test_the_shipped_code_does_not_import_the_local_stack():
    import subprocess
    import sys

    code = ("import sys, pipelines.cli.main, pipelines.streaming.job, pipelines.spark.session; "
            "print([m for m in sys.modules if m.startswith('pipelines.devstack')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
