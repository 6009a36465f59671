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


FORKED = """
import os, sys, pipelines.spark.worker_daemon as d
d.preload()   # pyarrow and numpy come with it: their native threads run when the daemon forks
pids = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:   # a worker: Arrow, numpy and the apply's writer thread pool work after the fork
        import numpy, pyarrow as pa, pyarrow.compute as pc
        from pipelines.apply.batch import _writers
        ok = (pc.sum(pa.array(range(100_000))).as_py() == 4_999_950_000
              and int((numpy.ones((64, 64)) @ numpy.ones((64, 64)))[0, 0]) == 64
              and _writers.submit(lambda: 7).result(timeout=10) == 7)
        os._exit(0 if ok else 3)
    pids.append(pid)
print([os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in pids])
"""


def test_workers_forked_after_the_preload_work():
    """pyspark's daemon forks without threads; the preload brings pyarrow's and numpy's native ones
    (jemalloc's background thread, OpenBLAS's pool). Both libraries mend themselves at fork: checked here."""
    out = subprocess.run([sys.executable, "-c", FORKED], capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.split() == ["[0,", "0,", "0]"]
