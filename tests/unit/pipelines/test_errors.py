"""Failures inside Spark become one typed line: cdckit's own exception when one was raised there."""
from pipelines.errors import ConfigError, PipelineFailed, StateLost, from_spark_failure

# Abridged from what `query.exception()` says when a task raised (Spark wraps it twice).
WRAPPED = """An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):
  File "/x/py4j/clientserver.py", line 644, in _call_proxy
    return_value = getattr(self.pool[obj_id], method)(*params)
pyspark.errors.exceptions.captured.PythonException: An exception was thrown from the Python worker:
Traceback (most recent call last):
  File "/x/pipelines/spark/partition_apply.py", line 129, in _apply_task
    rows = list(apply_rows(chunks, stores, dlq, dict(fences), extra, how))
{inner}
 SQLSTATE: 38000
Caused by: py4j.Py4JException: An exception was raised by the Python Proxy.
	at py4j.Protocol.getReturnValue(Protocol.java:476)
"""


def test_topic_lost_inside_a_task_is_state_lost_with_the_fix():
    text = WRAPPED.format(inner="connectors.kafka.broker_errors.TopicLost: t.public.c[0]: the topic or partition no longer "
                                "exists (recover with `cdckit bootstrap`)")
    error = from_spark_failure(text)
    assert isinstance(error, StateLost) and error.exit_code == 5
    assert str(error) == "t.public.c[0]: the topic or partition no longer exists (recover with `cdckit bootstrap`)"


def test_a_config_error_keeps_its_field():
    error = from_spark_failure(WRAPPED.format(inner="pipelines.errors.ConfigError: config error at 'tables.0.key': "
                                                    "not a column"))
    assert isinstance(error, ConfigError) and error.field == "tables.0.key" and error.exit_code == 2


def test_an_unknown_python_error_is_its_type_and_message_not_the_wrapper():
    error = from_spark_failure(WRAPPED.format(inner="ZeroDivisionError: division by zero"))
    assert isinstance(error, PipelineFailed) and str(error) == "ZeroDivisionError: division by zero"


def test_a_java_failure_is_its_innermost_cause():
    text = ("org.apache.spark.SparkException: Job aborted.\nCaused by: java.io.IOException: No space left on device\n"
            "\tat java.io.FileOutputStream.writeBytes(Native Method)\n")
    assert str(from_spark_failure(text)) == "IOException: No space left on device"


def test_text_without_an_exception_is_its_first_line():
    assert str(from_spark_failure("\n  query stopped for no reason given\nmore")) == "query stopped for no reason given"


def test_missing_privileges_are_a_config_error_at_postgres_user():
    from pipelines.errors import PrivilegesMissing

    error = PrivilegesMissing("cdc", [f"SELECT on public.t{i}" for i in range(7)])
    assert isinstance(error, ConfigError) and error.exit_code == 2 and error.field == "postgres.user"
    assert "cdc lacks SELECT on public.t0;" in str(error) and "and 2 more" in str(error)
    assert len(error.missing) == 7
