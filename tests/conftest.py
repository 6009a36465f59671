from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def server_state_dir(prefix: str) -> Path:
    """A state dir the postgres user can reach: not under pytest's tmp dir, which pytest resets to
    mode 700 whenever another pytest session starts."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    return path


def pytest_addoption(parser):
    parser.addoption("--all-tiers", action="store_true", dest="all_tiers",
                     help="run the integration and drill tiers even when an earlier tier failed")


def pytest_configure(config):
    from tests.support import kafka_clients
    from tests.support.tiers import Tiers

    config.pluginmanager.register(Tiers(config), "cdckit-tiers")
    kafka_clients.track()


def pytest_collection_finish(session):
    """Start the stack in the background as soon as the run is known to need it: its servers come
    up while the unit tests run."""
    from tests.support.tiers import uses_stack

    if not session.config.option.collectonly and any(uses_stack(item) for item in session.items):
        from tests.support.stack import BackgroundStack

        BackgroundStack.start(server_state_dir("cdckit-test-stack-"))


@pytest.fixture(scope="session")
def stack():
    """The real servers, once for the whole run (started by `pytest_collection_finish`)."""
    from tests.support.stack import BackgroundStack

    background = BackgroundStack.current or BackgroundStack.start(server_state_dir("cdckit-test-stack-"))
    yield background.endpoints()
    # Let go of the Kafka clients tests ran in this process before the broker stops (no
    # reconnect lines at the end of the run); noise control only, never the run's outcome.
    from pipelines.spark.partition_apply import release_kafka_clients

    try:
        release_kafka_clients()
    except Exception as exc:  # noqa: BLE001
        print(f"stack teardown: Kafka clients not let go: {exc}")


@pytest.hookimpl(trylast=True)  # after the session fixtures' teardown
def pytest_sessionfinish(session):
    from tests.support import kafka_clients
    from tests.support.stack import BackgroundStack

    # Before the broker stops: a client still open would print reconnect lines after the run.
    for line in kafka_clients.close_leftovers():
        print(f"\nkafka client left open by a test, closed: {line}")
    if BackgroundStack.current is not None:
        BackgroundStack.current.stop()


@pytest.fixture(autouse=True)
def _isolated_secrets():
    """Secrets registered by one test must not mask (or fail to mask) in another."""
    from pipelines import secrets

    before = secrets.registered()
    yield
    secrets.keep_only(before)


@pytest.fixture(scope="session")
def spark():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from pipelines.devstack.jars import spark_kafka_jars
    from pipelines.spark.class_archive import driver_java_options
    from pipelines.spark.kafka_source import KafkaDataSource

    builder = SparkSession.builder
    jars = spark_kafka_jars()  # the built-in kafka source too, as `cdckit run` has it
    if jars:
        builder = builder.config("spark.jars", ",".join(str(j) for j in jars))
    session = (builder.master("local[2]").appName("cdckit-tests")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.extraJavaOptions", driver_java_options())  # as cdckit's driver
               .config("spark.sql.streaming.stateStore.providerClass",
                       "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(KafkaDataSource)
    yield session
    session.stop()


