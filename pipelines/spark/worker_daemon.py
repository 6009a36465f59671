"""The Python workers' daemon (`spark.python.daemon.module`): pyspark's own, started with
the installed pyspark ahead of the copy Spark puts first on the workers' path.

Spark starts its Python workers with $SPARK_HOME/python/lib/pyspark.zip (and py4j's zip) first on
PYTHONPATH. For a pip-installed pyspark that zip is a second copy of the installed package, and
one without bytecode: every daemon start compiled pyspark's modules from source again (~2.5 s of
CPU per start, the first micro-batch's and every bootstrap's; benchmarks/first_minute.py). When
the zip is that copy (it lies inside the installed package), it is dropped from the path, so the
installed package and its cached bytecode are imported. A Spark distribution's zip (a cluster's
$SPARK_HOME) is left as it is.
"""
from pipelines.spark.installed_pyspark import prefer_installed_pyspark


def quiet_known_warnings() -> None:
    """Warnings the workers (forked from this daemon, they keep its filters) would write to the Spark
    log at every batch, about nothing cdckit can act on: pyspark's own pd.concat in the serializer of
    applyInPandasWithState (the documents' fold) warns of a pandas change its frames do not meet."""
    import warnings

    warnings.filterwarnings("ignore", message="The behavior of DataFrame concatenation with empty or all-NA",
                            category=FutureWarning)


# What a worker's first task imports (the tables' apply, the Kafka source's reader), imported here
# once: every worker forked after has it. Each worker imported it itself before (~0.7 s of CPU),
# so the first batches after a job's start waited, a worker at a time, for workers doing so: 1.6-2.0 s
# batches for ~3 batches instead of ~0.3 s (the updates' first seconds in benchmarks/beside_pgsync.py).
PRELOADED = ("pipelines.spark.partition_apply", "pipelines.spark.kafka_source")


def preload() -> None:
    """PRELOADED imported, then frozen out of the collector's sight (the workers' collections
    would walk the modules, and the writes of its marks would copy the shared pages per worker).
    pyspark's daemon forks without threads of its own; these imports bring pyarrow's and numpy's
    native ones (jemalloc's background thread, OpenBLAS's pool), which both libraries stop or
    mend around a fork (tests/unit/pipelines/spark/test_worker_daemon.py forks workers after it)."""
    import gc
    import importlib

    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a worker then imports what its task needs itself, as before
            pass
    gc.collect()
    gc.freeze()


prefer_installed_pyspark()
quiet_known_warnings()

from pyspark import daemon  # noqa: E402 - after the path is set

if __name__ == "__main__":
    preload()
    daemon.manager()
