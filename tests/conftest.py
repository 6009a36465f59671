from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    """The real servers, once for the whole run."""
    from tests.stack import provide

    with provide(tmp_path_factory.mktemp("devstack")) as endpoints:
        yield endpoints


@pytest.fixture(autouse=True)
def _isolated_secrets():
    """Secrets registered by one test must not mask (or fail to mask) in another."""
    from pipelines import secrets

    before = set(secrets._known)
    yield
    secrets._known.clear()
    secrets._known.update(before)


@pytest.fixture(scope="session")
def spark():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from pipelines.kafka_source import KafkaDataSource

    session = (SparkSession.builder.master("local[2]").appName("cdckit-tests")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(KafkaDataSource)
    yield session
    session.stop()


