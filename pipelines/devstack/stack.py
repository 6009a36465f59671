"""`devstack up|down|status`: bring the five servers (and, with monitoring, Prometheus; with
--spark-cluster, a Spark master and two workers) up healthy,
report, and stop exactly them."""
from __future__ import annotations

import time
from dataclasses import dataclass

from pipelines.devstack import processes
from pipelines.devstack.monitoring import Prometheus
from pipelines.devstack.search_servers import SEARCH_ENGINES
from pipelines.devstack.servers import Connect, Kafka, Postgres, Redis, Server
from pipelines.devstack.settings import SPARK_PORT_SPAN, StackSettings
from pipelines.devstack.spark_cluster import SparkWorker, cluster_servers


class DevstackError(Exception):
    pass


@dataclass
class ServerState:
    name: str
    version: str
    endpoint: str
    pid: int | None
    healthy: bool
    log: str


def server_classes(settings: StackSettings) -> tuple[type[Server], ...]:
    core = (Postgres, Kafka, Redis, SEARCH_ENGINES[settings.search_engine], Connect)
    # Prometheus when asked for, or when an earlier `up --with-monitoring` left its pid file: `down`
    # stops it and `status` shows it without the flag; otherwise the stack's health ignores it.
    if settings.monitoring or Prometheus(settings).pid_file.exists():
        return (*core, Prometheus)
    return core


def servers(settings: StackSettings, recorded: bool = True) -> list[Server]:
    """The stack's servers. The Spark cluster when asked for, or when one started before is still
    recorded (`recorded`: its pid files, for `down` and `status`; else only a running one, so a pid
    file left by a reboot does not make a plain `up` start it)."""
    out = [cls(settings) for cls in server_classes(settings)]
    cluster = cluster_servers(settings)
    left = any(s.pid_file.exists() if recorded else s.pid() is not None for s in cluster)
    if settings.spark_cluster or left:
        out.extend(cluster)
    return out


def _healthy(server: Server) -> bool:
    try:
        return server.healthy()
    except Exception:  # noqa: BLE001 - any failure to answer means not healthy
        return False


def status(settings: StackSettings) -> list[ServerState]:
    return [ServerState(s.name, s.version(), s.endpoint(), s.pid(), s.pid() is not None and _healthy(s), str(s.log))
            for s in servers(settings)]


def up(settings: StackSettings, say=print) -> list[ServerState]:
    settings.logs.mkdir(parents=True, exist_ok=True)
    todo = servers(settings, recorded=False)
    # Each server's own port and the one above it (Kafka's controller, OpenSearch's transport).
    processes.reserve_ports([p + i for p in settings.ports.values() for i in (0, 1)]
                            + [settings.spark_port + i for i in range(SPARK_PORT_SPAN)])
    # Refuse before starting anything: a missing package or a port held by someone else.
    for server in todo:
        server.check_installed()
        if server.pid() is None and processes.port_in_use(server.port):
            raise DevstackError(f"{server.name}: port {server.port} is taken by another process "
                                f"(set CDCKIT_DEVSTACK_{server.name.upper()}_PORT to use another)")
    started = time.monotonic()
    # Connect needs the broker; Spark's workers need their master.
    early = [s for s in todo if not isinstance(s, (Connect, SparkWorker))]
    late = [s for s in todo if isinstance(s, (Connect, SparkWorker))]
    for group in (early, late):
        launched = []
        for server in group:
            if server.pid() is not None:
                say(f"  {server.name:<9} already running (pid {server.pid()})")
            else:
                server.start()
                launched.append(server)
        for server in group:
            if not processes.wait_until(lambda: _healthy(server), settings.start_timeout_s):
                raise DevstackError(
                    f"{server.name} did not answer at {server.endpoint()} within {settings.start_timeout_s:g} s; "
                    f"log: {server.log}\n{processes.log_tail(server.log)}")
            server.after_healthy()
            if server in launched:
                say(f"  {server.name:<9} up at {server.endpoint()} (pid {server.pid()}, "
                    f"{time.monotonic() - started:.1f} s)")
    return status(settings)


def down(settings: StackSettings, say=print) -> None:
    # Reverse order: Connect first, so it does not log a storm of broker errors.
    for server in reversed(servers(settings)):
        pid = server.pid()
        if server.stop():
            say(f"  {server.name:<9} stopped (pid {pid})")
        else:
            say(f"  {server.name:<9} not running")
