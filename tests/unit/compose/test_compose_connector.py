"""What cdckit does inside the stack, from the config it mounts (compose/config/cdckit.yaml, with
the secrets of .env.example): the connector it registers reaches the compose services, carries
truncates as marker rows, and `cdckit config check` accepts the file."""
from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from pipelines.cli.main import main
from pipelines.config import load_config
from pipelines.ops.connector_admin import wanted_config
from tests.support.compose_tools import COMPOSE_DIR, read_env_file, rendered

ENV_EXAMPLE = COMPOSE_DIR / ".env.example"
CONFIG = COMPOSE_DIR / "config" / "cdckit.yaml"


@pytest.fixture(scope="module")
def stack():
    return rendered(ENV_EXAMPLE)


@pytest.fixture
def secrets(monkeypatch, stack):
    """The environment compose gives the cdckit container."""
    env = stack["services"]["cdckit"]["environment"]
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


def test_registered_connector_reaches_the_compose_services(stack, secrets):
    cfg = load_config(CONFIG)
    generated = wanted_config(cfg)
    services = stack["services"]
    postgres_env = services["postgres"]["environment"]
    assert generated["database.hostname"] == "postgres" and generated["database.port"] == "5432"
    assert generated["database.dbname"] == postgres_env["POSTGRES_DB"]
    # Debezium connects as the replication role the init script makes, never as the superuser.
    assert generated["database.user"] == "cdckit_cdc" != postgres_env["POSTGRES_USER"]
    assert cfg.postgres.reader_user == "cdckit_reader"
    # The password as a reference the Connect worker resolves from its own environment (never stored).
    assert generated["database.password"] == "${env:CDCKIT_CDC_PASSWORD}"
    connect_env = services["connect"]["environment"]
    assert connect_env["CDCKIT_CDC_PASSWORD"] == postgres_env["CDCKIT_CDC_PASSWORD"] == read_env_file(ENV_EXAMPLE)[
        "CDCKIT_CDC_PASSWORD"]
    assert "POSTGRES_PASSWORD" not in connect_env
    assert connect_env["CONNECT_CONFIG_PROVIDERS"].split(",") == ["env", "dir"]
    assert connect_env["CONNECT_CONFIG_PROVIDERS_ENV_CLASS"].endswith(".EnvVarConfigProvider")
    advertised = services["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    assert f"PLAINTEXT://{cfg.kafka.bootstrap_servers}" in advertised.split(",")
    assert urlsplit(cfg.connect.url).hostname == "connect"
    assert urlsplit(cfg.search.url).hostname == "opensearch" and cfg.search.kind == "opensearch"
    assert cfg.search.password.get() == services["opensearch"]["environment"]["OPENSEARCH_INITIAL_ADMIN_PASSWORD"]
    assert urlsplit(cfg.redis.url).hostname == "redis"
    assert cfg.redis.password.get() == services["redis"]["environment"]["REDIS_PASSWORD"]
    # producer.override.* in the generated config needs the worker to allow client overrides.
    assert any(k.startswith("producer.override.") for k in generated)


def test_truncates_travel_as_keyed_marker_rows(secrets):
    """Apache Kafka refuses Debezium's key-less truncate event on a compacted topic."""
    cfg = load_config(CONFIG)
    generated = wanted_config(cfg)
    assert generated["skipped.operations"] == "t"
    assert cfg.postgres.truncate_table in generated["table.include.list"].split(",")
    assert generated["topic.creation.default.cleanup.policy"] == "compact"


def test_checkpoints_live_in_the_checkpoints_volume(stack, secrets):
    cfg = load_config(CONFIG)
    volume_targets = [m["target"] for m in stack["services"]["cdckit"]["volumes"] if m["type"] == "volume"]
    assert any(str(cfg.spark.checkpoint_dir).startswith(target + "/") for target in volume_targets)
    assert cfg.metrics_port == 9464 and cfg.metrics_host == "0.0.0.0"
    assert {p["target"] for p in stack["services"]["cdckit"]["ports"]} == {cfg.metrics_port}


def test_config_check_accepts_the_compose_config(secrets, capsys):
    assert main(["config", "check", "-c", str(CONFIG)]) == 0, capsys.readouterr()


def test_the_init_script_makes_the_roles_the_config_names(secrets):
    """compose/initdb/20-cdckit-roles.sh binds connectors/sql/roles.sql's variables as
    `cdckit config roles-sql` would for the compose config, and mounts the script where it looks."""
    import re
    import shlex

    from connectors import postgres_roles

    cfg = load_config(CONFIG)
    script = (COMPOSE_DIR / "initdb" / "20-cdckit-roles.sh").read_text()
    given = dict(re.findall(r"-v (\w+)=(\S+)", script.split(" -f ")[0]))
    given = {k: v for k, v in given.items() if k != "ON_ERROR_STOP"}
    pg = cfg.postgres
    wanted = postgres_roles.variables(pg.user, pg.reader_user, [t.name for t in cfg.tables], pg.heartbeat_table,
                                      pg.signal_table, pg.truncate_table, pg.publication)
    assert given == wanted
    assert "ALTER ROLE cdckit_cdc PASSWORD :'cdc_pw'" in script and "CDCKIT_CDC_PASSWORD" in script
    mounts = {m["target"]: m["source"] for m in rendered(ENV_EXAMPLE)["services"]["postgres"]["volumes"]}
    default_path = shlex.split(re.search(r'ROLES_SQL:-([^}]+)}', script).group(1))[0]
    assert mounts[default_path] == str(postgres_roles.SCRIPT)
