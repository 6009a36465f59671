"""Where the local stack keeps its state and which loopback ports it uses."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_PORTS = {"postgres": 55432, "kafka": 59092, "connect": 58083, "redis": 56379, "search": 59200,
                 "prometheus": 59090, "spark": 57077}
# The Spark cluster's ports from its base up: master, master UI, then each worker's RPC and UI.
SPARK_PORT_SPAN = 8
_TRUE = ("1", "true", "yes", "on")


def port_from_env(name: str) -> int:
    value = os.environ.get(f"CDCKIT_DEVSTACK_{name.upper()}_PORT")
    return int(value) if value else DEFAULT_PORTS[name]


@dataclass(frozen=True)
class StackSettings:
    state_dir: Path = field(default_factory=lambda: Path(os.environ.get("CDCKIT_DEVSTACK_DIR", ".devstack")).resolve())
    ports: dict[str, int] = field(default_factory=lambda: {n: port_from_env(n) for n in DEFAULT_PORTS})
    database: str = "cdckit"
    # The search engine: a real OpenSearch node, or osmem-server (lighter, in memory).
    search_engine: str = field(default_factory=lambda: os.environ.get("CDCKIT_DEVSTACK_SEARCH", "opensearch"))
    # The optional Prometheus (`up --with-monitoring`); `down` and `status` also find one started before.
    monitoring: bool = field(
        default_factory=lambda: os.environ.get("CDCKIT_DEVSTACK_MONITORING", "").lower() in _TRUE)
    # The optional Spark standalone cluster (`up --spark-cluster`): a master and two workers.
    spark_cluster: bool = field(
        default_factory=lambda: os.environ.get("CDCKIT_DEVSTACK_SPARK_CLUSTER", "").lower() in _TRUE)
    # A JVM server (OpenSearch, Connect) on a busy 2-core machine can take well over a minute.
    start_timeout_s: float = 180.0

    def __post_init__(self) -> None:
        if self.search_engine not in ("opensearch", "osmem"):
            raise ValueError(f"CDCKIT_DEVSTACK_SEARCH must be 'opensearch' or 'osmem', not {self.search_engine!r}")

    @property
    def logs(self) -> Path:
        return self.state_dir / "logs"

    @property
    def run(self) -> Path:
        return self.state_dir / "run"

    def log(self, server: str) -> Path:
        return self.logs / f"{server}.log"

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.ports['kafka']}"

    @property
    def connect_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['connect']}"

    @property
    def search_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['search']}"

    @property
    def prometheus_port(self) -> int:
        # Port maps written before monitoring existed (the tests' own) have no entry for it.
        return self.ports.get("prometheus") or port_from_env("prometheus")

    @property
    def prometheus_url(self) -> str:
        return f"http://127.0.0.1:{self.prometheus_port}"

    @property
    def spark_port(self) -> int:
        return self.ports.get("spark") or port_from_env("spark")

    @property
    def spark_master_url(self) -> str:
        return f"spark://127.0.0.1:{self.spark_port}"

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.ports['redis']}/0"
