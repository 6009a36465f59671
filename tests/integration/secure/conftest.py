"""The secure stack every test of this package shares: one SASL_SSL broker (ACLs on, a second SCRAM
user) and one Kafka Connect worker whose clients all speak SASL_SSL, started when the first test
asks for them and stopped after the package's last test."""
from __future__ import annotations

import os
import shutil

import pytest

PW_ENV = "CDCKIT_TEST_KAFKA_PW"
ANALYST, ANALYST_PW = "analyst", "Analyst-Pa55-41c7"


@pytest.fixture(scope="package")
def secure_broker():
    from tests.support.secure_kafka import start_secure_kafka

    broker = start_secure_kafka(others={ANALYST: ANALYST_PW}, authorizer=True)
    before = os.environ.get(PW_ENV)
    os.environ[PW_ENV] = broker.password
    try:
        yield broker
    finally:
        broker.stop()
        if before is None:
            os.environ.pop(PW_ENV, None)
        else:
            os.environ[PW_ENV] = before
        shutil.rmtree(broker.state_dir, ignore_errors=True)


@pytest.fixture(scope="package")
def secure_connect(secure_broker):
    """The broker's Connect worker (stopped with the broker); a test that adds a connector deletes it."""
    from pipelines.config import parse_config
    from tests.support.configs import BASE

    kafka = parse_config({**BASE, "kafka": secure_broker.kafka_config()}).kafka
    return secure_broker.start_connect(kafka.java_client_config())
