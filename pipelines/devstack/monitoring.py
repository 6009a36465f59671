"""The local stack's optional Prometheus (`devstack up --with-monitoring`): Debian's binary, its
own config and data under the state dir, scraping the pipeline's metrics with compose's rules.

Only /usr/bin/prometheus is used, never the Debian package's service or its /etc config."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import requests
import yaml

from pipelines.devstack.packages import system_binary
from pipelines.devstack.servers import Server

ROOT = Path(__file__).resolve().parents[2]
RULES_FILE = ROOT / "compose" / "monitoring" / "alerts.yml"
EXAMPLE_CONFIG = ROOT / "cdckit.example.yaml"
SCRAPE_INTERVAL = "5s"


def pipeline_metrics_port(config: Path | None = None) -> int:
    """The port `cdckit run` serves its metrics on with the config the quickstart uses
    (CDCKIT_CONFIG, else cdckit.example.yaml): its `metrics_port`, else the model's default.
    Read from the YAML alone: no secret needs resolving to know a port."""
    from pipelines.config import Config

    path = config or Path(os.environ.get("CDCKIT_CONFIG") or EXAMPLE_CONFIG)
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError):
        raw = {}
    port = raw.get("metrics_port") if isinstance(raw, dict) else None
    return int(port) if port else Config.model_fields["metrics_port"].default


def prometheus_config(metrics_port: int, rules: Path = RULES_FILE) -> dict:
    return {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
        "rule_files": [str(rules)],
        # Job name `cdckit`: the rules' `up{job="cdckit"}` (compose's config uses it too).
        "scrape_configs": [{"job_name": "cdckit", "scrape_interval": SCRAPE_INTERVAL,
                            "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}]}],
    }


class Prometheus(Server):
    name = "prometheus"

    @property
    def port(self) -> int:
        return self.s.prometheus_port

    @property
    def config_file(self) -> Path:
        return self.home / "prometheus.yml"

    def argv(self) -> list[str]:
        binary = system_binary("prometheus", self.name, "prometheus")
        return [str(binary), f"--config.file={self.config_file}", f"--storage.tsdb.path={self.home / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=7d"]

    def prepare(self) -> None:
        super().prepare()
        self.config_file.write_text(yaml.safe_dump(prometheus_config(pipeline_metrics_port()), sort_keys=False))

    def healthy(self) -> bool:
        return requests.get(f"{self.endpoint()}/-/ready", timeout=2).ok

    def endpoint(self) -> str:
        return self.s.prometheus_url

    def version(self) -> str:
        try:
            first = subprocess.run([str(system_binary("prometheus", self.name, "prometheus")), "--version"],
                                   capture_output=True, text=True, timeout=10).stdout.splitlines()[0]
        except Exception:  # noqa: BLE001 - status reports what it can
            return "Prometheus"
        # "prometheus, version 2.42.0+ds (branch: ...)"
        return "Prometheus " + first.split("version", 1)[-1].split()[0] if "version" in first else "Prometheus"

