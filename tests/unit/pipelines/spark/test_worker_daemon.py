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


def test_the_daemon_imports_what_workers_need_before_forking_them_and_a_failed_import_is_no_failure():
    """Workers forked from the daemon start with the apply and the Kafka source imported (each
    imported them itself before: the first batches after a start waited for that)."""
    code = ("import gc, sys; import pipelines.spark.worker_daemon as d; wanted = d.PRELOADED; "
            "d.PRELOADED = ('cdckit_no_such_module',) + wanted; d.preload(); "
            "print(all(m in sys.modules for m in wanted), gc.get_freeze_count() > 0)")
    before = subprocess.run([sys.executable, "-c", "import sys, pipelines.spark.worker_daemon; "
                             "print('pipelines.spark.partition_apply' in sys.modules)"],
                            capture_output=True, text=True, timeout=60, check=True).stdout
    assert before.split() == ["False"]   # importing the module alone (tests, the driver) preloads nothing
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.split() == ["True", "True"]
