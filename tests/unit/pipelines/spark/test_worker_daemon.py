"""The Python workers' daemon (pipelines/spark/worker_daemon.py): the warning filters its forked
workers inherit."""
import subprocess
import sys

# What pyspark's serializer for applyInPandasWithState does with the empty rows it adds beside a batch's.
CONCAT = ('import pandas as pd; pd.concat([pd.DataFrame({"a": [1.5], "b": ["x"]}), '
          'pd.DataFrame({"a": [None], "b": [None]})], ignore_index=True); '
          'import warnings; warnings.warn("another pandas change", FutureWarning)')


def run(prelude: str) -> str:
    return subprocess.run([sys.executable, "-W", "always", "-c", prelude + CONCAT], capture_output=True, text=True,
                          timeout=60, check=True).stderr


def test_pysparks_concat_warning_is_kept_out_of_the_spark_log_and_others_are_not():
    assert "DataFrame concatenation with empty or all-NA" in run("")   # what the workers wrote at every batch
    quiet = run("import pipelines.spark.worker_daemon; ")               # the daemon's import sets the filter
    assert "DataFrame concatenation" not in quiet and "another pandas change" in quiet
