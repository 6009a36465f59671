"""The local stack's optional Prometheus: off unless asked for, its own config and data under the
state dir, scraping the pipeline's metrics port with compose's rules (no Debian service, no /etc)."""
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from pipelines.devstack import __main__ as cli
from pipelines.devstack import monitoring, processes, stack
from pipelines.devstack.monitoring import Prometheus, pipeline_metrics_port, prometheus_config
from pipelines.devstack.settings import DEFAULT_PORTS, StackSettings


@pytest.fixture
def settings(tmp_path, monkeypatch):
    monkeypatch.delenv("CDCKIT_DEVSTACK_MONITORING", raising=False)
    monkeypatch.delenv("CDCKIT_DEVSTACK_PROMETHEUS_PORT", raising=False)
    return StackSettings(state_dir=tmp_path / "state")


def test_prometheus_has_its_own_loopback_port_with_an_env_override(settings, monkeypatch):
    assert DEFAULT_PORTS["prometheus"] == 59090 and settings.prometheus_url == "http://127.0.0.1:59090"
    monkeypatch.setenv("CDCKIT_DEVSTACK_PROMETHEUS_PORT", "59999")
    assert StackSettings().prometheus_port == 59999
    # A port map without it (the tests' own) falls back to the default.
    assert StackSettings(ports={"postgres": 1}).prometheus_url == "http://127.0.0.1:59999"


def test_monitoring_is_off_unless_asked_for(settings, monkeypatch):
    assert not settings.monitoring
    assert Prometheus not in stack.server_classes(settings)
    monkeypatch.setenv("CDCKIT_DEVSTACK_MONITORING", "1")
    assert StackSettings(state_dir=settings.state_dir).monitoring


def test_a_started_prometheus_is_found_without_the_flag(settings):
    """`down` and `status` run without --with-monitoring: the pid file `up` wrote tells them."""
    pid_file = Prometheus(settings).pid_file
    pid_file.parent.mkdir(parents=True)
    pid_file.write_text("1 0\n")
    assert stack.server_classes(settings)[-1] is Prometheus
    pid_file.unlink()
    assert Prometheus not in stack.server_classes(settings)


def test_down_stops_a_started_prometheus_by_its_pid(settings):
    server = Prometheus(settings)
    pid = processes.spawn(["sleep", "60"], server.log, server.pid_file)   # stands in for prometheus
    said = []
    stack.down(settings, say=said.append)
    assert f"  prometheus stopped (pid {pid})" in said and not processes.alive(pid)
    assert not server.pid_file.exists() and Prometheus not in stack.server_classes(settings)


def test_up_with_monitoring_adds_prometheus(settings, monkeypatch):
    seen = []
    monkeypatch.setattr(stack, "up", lambda s, say: seen.append([c.__name__ for c in stack.server_classes(s)]))
    monkeypatch.setattr(stack, "status", lambda s: [])
    monkeypatch.setenv("CDCKIT_DEVSTACK_DIR", str(settings.state_dir))
    assert cli.main(["up", "--with-monitoring"]) == 0
    assert cli.main(["up"]) == 0
    assert seen[0][-1] == "Prometheus" and "Prometheus" not in seen[1]


def test_the_config_scrapes_the_pipeline_with_the_compose_rules():
    config = prometheus_config(9464)
    assert config["rule_files"] == [str(monitoring.RULES_FILE)] and monitoring.RULES_FILE.is_file()
    [job] = config["scrape_configs"]
    assert job["job_name"] == "cdckit" and job["scrape_interval"] == "5s"
    assert job["static_configs"] == [{"targets": ["127.0.0.1:9464"]}]


def test_the_metrics_port_is_the_quickstart_configs(tmp_path, monkeypatch):
    monkeypatch.delenv("CDCKIT_CONFIG", raising=False)
    assert pipeline_metrics_port() == 9464          # cdckit.example.yaml leaves the default
    own = tmp_path / "cdckit.yaml"
    own.write_text("topic_prefix: x\nmetrics_port: 9555\n")
    monkeypatch.setenv("CDCKIT_CONFIG", str(own))
    assert pipeline_metrics_port() == 9555
    own.write_text("topic_prefix: x\n")
    assert pipeline_metrics_port() == 9464


def test_prometheus_keeps_config_and_data_under_the_state_dir(settings, monkeypatch):
    monkeypatch.setattr(monitoring, "system_binary", lambda *a: Path("/usr/bin/prometheus"))
    monkeypatch.delenv("CDCKIT_CONFIG", raising=False)
    server = Prometheus(settings)
    server.prepare()
    argv = server.argv()
    assert argv[0] == "/usr/bin/prometheus"
    assert f"--config.file={settings.state_dir / 'prometheus' / 'prometheus.yml'}" in argv
    assert f"--storage.tsdb.path={settings.state_dir / 'prometheus' / 'data'}" in argv
    assert "--web.listen-address=127.0.0.1:59090" in argv
    assert not any("/etc/" in a or "/var/lib/prometheus" in a for a in argv)   # never the Debian service's
    assert yaml.safe_load(server.config_file.read_text()) == prometheus_config(9464)
    assert server.endpoint() == "http://127.0.0.1:59090" and server.log == settings.logs / "prometheus.log"


def test_the_generated_config_passes_promtool(settings, monkeypatch):
    promtool = shutil.which("promtool")
    if not promtool:
        pytest.skip("promtool is not installed (Debian package prometheus; scripts/setup installs it)")
    monkeypatch.delenv("CDCKIT_CONFIG", raising=False)
    server = Prometheus(settings)
    server.prepare()
    run = subprocess.run([promtool, "check", "config", str(server.config_file)], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    from tests.unit.compose.test_monitoring_rules import ALERTS

    assert f"{len(ALERTS)} rules found" in run.stdout
