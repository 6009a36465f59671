"""No Docker engine here: the compose stack is checked statically, and against cdckit's own config."""
import re
from urllib.parse import urlsplit

import pytest
import yaml

from pipelines.ops.connector import wanted_config
from pipelines.config import load_config
from tests.support.stack import ROOT

COMPOSE = ROOT / "compose"


@pytest.fixture(scope="module")
def compose():
    return yaml.safe_load((COMPOSE / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def env():
    pairs = [l.split("=", 1) for l in (COMPOSE / ".env.example").read_text().splitlines()
             if l.strip() and not l.startswith("#")]
    return dict(pairs)


def test_services_are_the_production_roles(compose):
    assert set(compose["services"]) == {"postgres", "kafka", "connect", "elasticsearch", "redis", "cdckit"}
    images = {name: svc.get("image", "") for name, svc in compose["services"].items()}
    assert images["postgres"].startswith("postgres:15")
    assert images["kafka"].startswith("apache/kafka:")
    assert images["connect"].startswith("quay.io/debezium/connect:")
    assert "elasticsearch" in images["elasticsearch"]
    assert compose["services"]["cdckit"]["build"]["dockerfile"] == "compose/Dockerfile"
    assert (ROOT / compose["services"]["cdckit"]["build"]["dockerfile"]).exists()


def test_every_service_has_a_healthcheck_and_waits_for_healthy_deps(compose):
    for name, svc in compose["services"].items():
        assert svc.get("healthcheck", {}).get("test"), name
        for dep, cond in (svc.get("depends_on") or {}).items():
            assert dep in compose["services"] and cond == {"condition": "service_healthy"}, (name, dep)


def test_host_ports_do_not_clash(compose):
    published = [p.rsplit(":", 2)[-2] for svc in compose["services"].values() for p in svc.get("ports", [])]
    assert len(published) == len(set(published))


def test_kafka_is_kraft_and_compacts(compose):
    env = compose["services"]["kafka"]["environment"]
    assert "controller" in env["KAFKA_PROCESS_ROLES"] and env["KAFKA_LOG_CLEANER_ENABLE"] == "true"


def test_postgres_has_logical_wal(compose):
    assert "wal_level=logical" in compose["services"]["postgres"]["command"]


def test_every_required_variable_is_in_env_example(compose, env):
    text = (COMPOSE / "docker-compose.yml").read_text()
    required = set(re.findall(r"\$\{(\w+):\?", text))
    assert required <= set(env), required - set(env)


def test_registered_connector_is_the_one_cdckit_generates(compose, env, monkeypatch):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    svc = compose["services"]["cdckit"]
    mounted = {v.split(":")[1]: v.split(":")[0] for v in svc["volumes"] if v.startswith("./")}
    config_path = svc["environment"]["CDCKIT_CONFIG"]
    assert config_path in mounted and svc["entrypoint"] == ["cdckit", "bootstrap"]  # applies the connector
    cfg = load_config(COMPOSE / mounted[config_path])
    generated = wanted_config(cfg)
    services = compose["services"]
    # The generated connector reaches the compose services by their names and container ports.
    assert generated["database.hostname"] in services
    assert generated["database.port"] == "5432"
    assert generated["database.dbname"] == services["postgres"]["environment"]["POSTGRES_DB"]
    assert generated["database.user"] == services["postgres"]["environment"]["POSTGRES_USER"]
    assert generated["database.password"] == env["POSTGRES_PASSWORD"]
    assert cfg.kafka.bootstrap_servers == services["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"].split("//")[1]
    assert urlsplit(cfg.connect.url).hostname == "connect"
    assert urlsplit(cfg.search.url).hostname == "elasticsearch" and cfg.search.kind == "elasticsearch"
    assert urlsplit(cfg.redis.url).hostname == "redis"
    # producer.override.* in the generated config needs the worker to allow client overrides.
    assert any(k.startswith("producer.override.") for k in generated)
    assert services["connect"]["environment"]["CONNECT_CONNECTOR_CLIENT_CONFIG_OVERRIDE_POLICY"] == "All"


def test_dockerfile_installs_the_package():
    text = (COMPOSE / "Dockerfile").read_text()
    assert "pip install" in text and "openjdk-17" in text and 'ENTRYPOINT ["cdckit"]' in text


def test_compose_runs_the_versions_the_local_stack_runs(compose):
    """The local stack's Kafka and Debezium come from the poms in pipelines/devstack/maven."""
    import xml.etree.ElementTree as ET

    from pipelines.devstack.jars import POMS

    def version(pom: str, artifact: str) -> str:
        ns = {"m": "http://maven.apache.org/POM/4.0.0"}
        for dep in ET.parse(POMS / pom).getroot().iterfind(".//m:dependency", ns):
            if dep.findtext("m:artifactId", namespaces=ns) == artifact:
                return dep.findtext("m:version", namespaces=ns)
        raise AssertionError(f"{artifact} not in {pom}")

    images = {name: svc.get("image", "") for name, svc in compose["services"].items()}
    assert images["kafka"] == f"apache/kafka:{version('kafka.pom.xml', 'kafka_2.13')}"
    assert images["connect"] == f"quay.io/debezium/connect:{version('debezium.pom.xml', 'debezium-connector-postgres')}"
