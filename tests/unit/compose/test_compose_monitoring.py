"""The compose `monitoring` profile: Prometheus and Grafana only under it, pinned in versions.env,
mounting the repo's files, scraping the job's metrics port, with no hard-coded secret."""
from __future__ import annotations

import pytest
import yaml

from pipelines.devstack import versions
from tests.support.compose_tools import COMPOSE_DIR, read_env_file, rendered
from tests.support.promql import MONITORING_DIR, run_promtool

ENV_EXAMPLE = COMPOSE_DIR / ".env.example"
MONITORING = {"prometheus", "grafana"}


@pytest.fixture(scope="module")
def full():
    return rendered(ENV_EXAMPLE, profiles=("monitoring",))


def _binds(service) -> dict[str, str]:
    """container path -> host path of the service's bind mounts (all must be read-only)."""
    binds = [m for m in service["volumes"] if m["type"] == "bind"]
    assert all(m.get("read_only") for m in binds)
    return {m["target"]: m["source"] for m in binds}


def _host_path(service, container_path: str):
    for target, source in _binds(service).items():
        if container_path == target or container_path.startswith(target + "/"):
            return (COMPOSE_DIR / source / container_path[len(target):].lstrip("/")).resolve()
    raise AssertionError(f"{container_path} is not on a bind mount")


def test_the_monitoring_services_exist_only_under_the_profile(full):
    plain = rendered(ENV_EXAMPLE)
    assert not MONITORING & set(plain["services"])
    assert MONITORING <= set(full["services"])
    for name, service in full["services"].items():
        assert service.get("profiles", []) == (["monitoring"] if name in MONITORING else []), name


def test_the_images_are_pinned_in_versions_env(full):
    pins = versions.pinned()
    assert full["services"]["prometheus"]["image"] == f"prom/prometheus:{pins['PROMETHEUS_VERSION']}"
    assert full["services"]["grafana"]["image"] == f"grafana/grafana:{pins['GRAFANA_VERSION']}"


def test_prometheus_mounts_the_repos_config_and_scrapes_the_job(full):
    prometheus = full["services"]["prometheus"]
    for source in _binds(prometheus).values():
        assert (COMPOSE_DIR / source).exists(), source
    [config_arg] = [a for a in prometheus["command"] if a.startswith("--config.file=")]
    config_file = _host_path(prometheus, config_arg.split("=", 1)[1])
    assert config_file == (MONITORING_DIR / "prometheus.yml").resolve()
    config = yaml.safe_load(config_file.read_text())
    assert [(config_file.parent / f).resolve() for f in config["rule_files"]] == \
        [(MONITORING_DIR / "alerts.yml").resolve()]
    [job] = config["scrape_configs"]
    metrics_port = yaml.safe_load((COMPOSE_DIR / "config" / "cdckit.yaml").read_text())["metrics_port"]
    assert job["job_name"] == "cdckit"
    assert job["static_configs"] == [{"targets": [f"cdckit:{metrics_port}"]}] and "cdckit" in full["services"]
    run = run_promtool("check", "config", config_file)
    assert run.returncode == 0, run.stdout + run.stderr


def test_grafana_is_provisioned_from_the_repo(full):
    grafana = full["services"]["grafana"]
    binds = _binds(grafana)
    for source in binds.values():
        assert (COMPOSE_DIR / source).is_dir(), source
    provisioning = _host_path(grafana, "/etc/grafana/provisioning")
    [source] = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())["datasources"]
    port = full["services"]["prometheus"]["ports"][0]["target"]
    assert source["type"] == "prometheus" and source["url"] == f"http://prometheus:{port}"
    [provider] = yaml.safe_load((provisioning / "dashboards" / "cdckit.yml").read_text())["providers"]
    dashboards = _host_path(grafana, provider["options"]["path"])
    assert (dashboards / "cdckit.json").is_file()
    assert _host_path(grafana, grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]).is_file()


def test_grafanas_admin_password_comes_from_the_env(full, tmp_path):
    env = full["services"]["grafana"]["environment"]
    assert env["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer" and env["GF_USERS_ALLOW_SIGN_UP"] == "false"
    assert env["GF_SECURITY_ADMIN_PASSWORD"] == "change-me-grafana"      # .env.example's
    bare = tmp_path / "bare.env"
    bare.write_text("".join(f"{k}={v}\n" for k, v in read_env_file(ENV_EXAMPLE).items()
                            if k != "GRAFANA_ADMIN_PASSWORD"))
    unset = rendered(bare, profiles=("monitoring",))["services"]["grafana"]["environment"]
    assert unset["GF_SECURITY_ADMIN_PASSWORD"] == "admin"     # Grafana's documented dev default
    shell = rendered(bare, {"GRAFANA_ADMIN_PASSWORD": "from-shell"}, profiles=("monitoring",))
    assert shell["services"]["grafana"]["environment"]["GF_SECURITY_ADMIN_PASSWORD"] == "from-shell"
