"""The job's wiring that needs no Spark: the JVM kafka source switch takes the same options."""
from types import SimpleNamespace

from pipelines.config import parse_config
from pipelines.spark.job import change_stream
from tests.support.configs import with_


class FakeReader:
    def __init__(self):
        self.fmt, self.options = None, {}

    def format(self, fmt):
        self.fmt = fmt
        return self

    def option(self, key, value):
        self.options[key] = value
        return self

    def load(self):
        return self


class FakeSpark:
    def __init__(self):
        self.readStream = FakeReader()
        self.sparkContext = SimpleNamespace(defaultParallelism=2)


def test_python_and_jvm_sources_get_the_same_options():
    python = change_stream(FakeSpark(), parse_config(with_("spark", {"max_offsets_per_trigger": 1000})))
    jvm = change_stream(FakeSpark(), parse_config(with_("spark", {"max_offsets_per_trigger": 1000,
                                                                  "kafka_source": "jvm"})))
    assert (python.fmt, jvm.fmt) == ("cdckit_kafka", "kafka")
    assert python.options["subscribePattern"] == parse_config(with_("spark", {})).topic_pattern
    assert python.options["kafka.bootstrap.servers"] == "127.0.0.1:9092"
    assert python.options["maxOffsetsPerTrigger"] == "1000"
    assert {k: v for k, v in jvm.options.items() if k != "failOnDataLoss"} == {
        k: v for k, v in python.options.items() if k not in ("ranges", "tasks", "kafka.log_level")}  # librdkafka's
    assert jvm.options["failOnDataLoss"] == "true" and python.options["ranges"] == "true"
    assert python.options["tasks"] == "2"  # one apply task per core and micro-batch


def test_progress_lag_from_spark_progress():
    from pipelines.spark.job import progress_lag

    progress = {"sources": [{"endOffset": '{"t": {"0": 5, "1": 7}}', "latestOffset": '{"t": {"0": 9, "1": 7}}'}]}
    assert progress_lag(progress) == {"t": 4}
    assert progress_lag(None) == {}
    assert progress_lag({"sources": [{"endOffset": "null", "latestOffset": None}]}) == {}
