import re
import zipfile
from pathlib import Path

import pytest

from derived.sinks.store_errors import StoreUnavailable
from pipelines.spark.stop_interruption import INTERRUPTIONS, QueryInterrupted, compact_interruptions

JAVA_TRACE = "".join(f"\tat org.apache.spark.sql.Frame{i}.call(Frame{i}.scala:{i})\n" for i in range(400))
# What Python gets when the query's stop interrupts the JVM call a foreachBatch function waits on.
INTERRUPTED = ("An error occurred while calling o123.collectToPython.\n: java.lang.InterruptedException\n"
               + JAVA_TRACE)


class Py4JJavaError(Exception):
    """Stands in for py4j's (its str is the JVM's whole trace)."""


def spark_pattern() -> str:
    """StreamExecution.PROXY_ERROR as the installed Spark builds it: its constant read from the jar."""
    import pyspark

    jar = next((Path(pyspark.__file__).parent / "jars").glob("spark-sql_*.jar"))
    with zipfile.ZipFile(jar) as z:
        data = z.read("org/apache/spark/sql/execution/streaming/runtime/StreamExecution$.class")
    at = data.index(b"py4j.protocol.Py4JJavaError: An error occurred while calling")
    length = int.from_bytes(data[at - 2:at], "big")   # a class file's UTF8 constant: its length first
    # Built by string concatenation: the names go where the constant holds \x01.
    return data[at:at + length].decode().replace("\x01", "|".join(INTERRUPTIONS))


def raising(exc):
    def batch(df, batch_id):
        raise exc
    return compact_interruptions(batch)


def test_an_interrupted_batch_is_one_short_line_spark_takes_for_a_stop():
    with pytest.raises(QueryInterrupted) as caught:
        raising(Py4JJavaError(INTERRUPTED))(None, 7)
    line = str(caught.value)
    assert "\n" not in line and len(line) < 160, line
    assert caught.value.__suppress_context__   # the long trace does not come back through the chain
    assert re.search(spark_pattern(), line, re.DOTALL)
    # Spark's regex recurses once per character after "calling": the original text is KBs of it.
    assert len(INTERRUPTED) > 20 * len(line)


def test_an_interruption_under_a_wrapper_is_found_through_the_chain():
    def batch(df, batch_id):
        try:
            raise Py4JJavaError(INTERRUPTED)
        except Py4JJavaError as exc:
            raise RuntimeError("apply failed") from exc

    with pytest.raises(QueryInterrupted, match="o123.collectToPython: java.lang.InterruptedException"):
        compact_interruptions(batch)(None, 1)


def test_other_failures_and_cdckits_own_errors_are_raised_as_they_are():
    for exc in (Py4JJavaError("An error occurred while calling o5.save.\n: java.io.IOException: disk full"),
                ValueError("java.lang.InterruptedException without a JVM call"),
                StoreUnavailable("search: " + INTERRUPTED)):
        with pytest.raises(type(exc)) as caught:
            raising(exc)(None, 1)
        assert caught.value is exc


def test_a_batch_that_ends_returns_what_it_returned():
    assert compact_interruptions(lambda df, batch_id: (df, batch_id))("df", 3) == ("df", 3)


def test_an_error_raised_for_a_stop_on_purpose_is_taken_for_the_stop():
    from pipelines.documents.documents_query import PausedForHandover
    from pipelines.spark.stop_interruption import stopped_on_purpose

    message = stopped_on_purpose("documents batch 9 stopped while waiting for a rebuild's hand-over to documents-1")
    assert message.startswith("documents batch 9 stopped") and "\n" not in message
    # What Spark matches: the Python traceback, whose last line is the exception's type and message.
    traceback = 'Traceback (most recent call last):\n  File "x.py", line 1, in write\n' \
                f"pipelines.documents.documents_query.PausedForHandover: {message}\n"
    assert re.search(spark_pattern(), traceback, re.DOTALL)
    with pytest.raises(PausedForHandover):   # cdckit's own: its type kept (LiveDocuments.exception knows it)
        raising(PausedForHandover(message))(None, 9)


PYTHON_TASK = ('org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n'
               + "".join(f'  File "/work/pipelines/apply/f{i}.py", line {i}, in step{i}\n    call{i}()\n    ^^^^^^\n'
                         for i in range(30))
               + "derived.sinks.store_errors.StoreUnavailable: search: 503 from the engine\n")
JOB_FAILED = ("An error occurred while calling o77.toArrow.\n"
              ": org.apache.spark.SparkException: Job aborted due to stage failure: "
              "Task 0 in stage 9.0 failed 1 times, most recent failure: Lost task 0.0 in stage 9.0 (TID 31): "
              + PYTHON_TASK + JAVA_TRACE
              + "\nDriver stacktrace:\n" + JAVA_TRACE + "Caused by: " + PYTHON_TASK + JAVA_TRACE + "\t... 42 more\n")


def test_a_long_failure_loses_its_frames_not_what_happened():
    from pipelines.errors import from_spark_failure
    from pipelines.spark.stop_interruption import MAX_CHARS, JavaCallFailed

    with pytest.raises(JavaCallFailed) as caught:
        raising(Py4JJavaError(JOB_FAILED))(None, 4)
    text = str(caught.value)
    assert len(JOB_FAILED) > 20_000 and len(text) <= MAX_CHARS, len(text)
    assert "\tat " not in text and '  File "' not in text and caught.value.__suppress_context__
    # What the job reads of it is as before: the error, whether a restart may help.
    before, after = from_spark_failure(JOB_FAILED), from_spark_failure(text)
    assert (type(after), str(after)) == (type(before), str(before))
    assert "StoreUnavailable: search: 503 from the engine" in text and "Lost task 0.0 in stage 9.0" in text
    assert not re.search(spark_pattern(), text, re.DOTALL)   # a failure, not the stop's interruption


def test_past_the_limit_the_start_the_end_and_cdckits_own_errors_are_kept():
    from pipelines.spark.stop_interruption import MAX_CHARS, without_frames

    text = "\n".join([": org.apache.spark.SparkException: first"]
                     + [f"org.apache.spark.SomeException: message {i} " + "x" * 80 for i in range(40)]
                     + ["pipelines.errors.SchemaChangeError: public.t: column c dropped"]
                     + [f"org.apache.spark.OtherException: message {i} " + "y" * 80 for i in range(40)])
    out = without_frames(text)
    assert len(out) <= MAX_CHARS + 200 and out.startswith(": org.apache.spark.SparkException: first")
    assert "pipelines.errors.SchemaChangeError: public.t: column c dropped" in out and "message 39 " in out
