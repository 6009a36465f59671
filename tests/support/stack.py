"""One fixture layer for the real servers: containers when a Docker engine answers, else the local stack.

Integration tests only see `Endpoints`, so the same tests run in both worlds.
"""
from __future__ import annotations

import os
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

# Bound here: the stack starts on a thread of its own while unit tests may patch confluent_kafka.admin.
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

ROOT = Path(__file__).resolve().parents[2]
# Tests get their own ports and state so they never touch a developer's running stack.
# CDCKIT_TEST_PORT_SHIFT moves them all, e.g. to run two suites side by side.
TEST_PORTS = {name: port + int(os.environ.get("CDCKIT_TEST_PORT_SHIFT", "0")) for name, port in
              {"postgres": 55532, "kafka": 59192, "connect": 58183, "redis": 56479, "search": 59300,
               "spark": 57177}.items()}


PARTITIONS = 3
# A segment rolls 2 s after its first record (when the next record comes) and the cleaner (every
# second on the local broker) compacts any closed segment: records superseded by a newer one of
# their key in a closed segment are gone seconds later. Tombstones stay for delete.retention.ms.
FAST_COMPACTION = {"segment.ms": 2000, "min.cleanable.dirty.ratio": 0.01, "min.compaction.lag.ms": 0}
# The suite starts ~60 short-lived Spark drivers on two cores shared with every server: without the
# optimizing compiler (C2) a driver's start-up and first jobs took 10.9 CPU-s instead of 18.7 and
# 8.8 s instead of 11.7 s (measured on this machine, idle). A test's few thousand changes never make
# C2's code pay off; cdckit's own default (a long-lived driver) keeps both compilers.
TEST_DRIVER_JVM = "-XX:TieredStopAtLevel=1"
# The stack's own JVM servers (broker, Connect, the search engine) too, for the same reason: in a
# suite's first minutes C2's compiler thread was the largest CPU user of each (broker 10.8 of 30 CPU-s,
# OpenSearch 23.8 of 59, Connect 14.2 of 39, read per thread from /proc), on the cores the tests need.
# Servers a test (re)starts in this process follow it too; cdckit's own devstack keeps both compilers.
TEST_SERVER_JVM = "-XX:TieredStopAtLevel=1"
os.environ.setdefault("CDCKIT_DEVSTACK_JAVA_OPTIONS", TEST_SERVER_JVM)


@dataclass
class Endpoints:
    pg_host: str
    pg_port: int
    pg_database: str
    pg_user: str
    bootstrap_servers: str
    connect_url: str
    redis_url: str
    search_url: str
    search_kind: str
    world: str  # "devstack" or "containers"
    pg_host_for_connect: str | None = None  # where Kafka Connect reaches Postgres, when it differs
    settings: Any = None  # the devstack's StackSettings (logs, pids) when world == "devstack"

    def config(self, tables: list[dict[str, Any]], prefix: str | None = None, **overrides: Any) -> dict[str, Any]:
        """A cdckit config dict for these servers; a fresh prefix/slot isolates each test."""
        prefix = prefix or f"t{uuid.uuid4().hex[:8]}"
        data = {
            "topic_prefix": prefix,
            "postgres": {"host": self.pg_host, "port": self.pg_port, "database": self.pg_database,
                         "user": self.pg_user, "sslmode": "disable", "slot": prefix.lower(),
                         "publication": prefix, "heartbeat_table": f"public.{prefix}_heartbeat",
                         "signal_table": f"public.{prefix}_signal", "truncate_table": f"public.{prefix}_truncates",
                         "connector_host": self.pg_host_for_connect, "connector_port": 5432 if self.pg_host_for_connect else None},
            # Production-shaped topics: several partitions, and a log cleaner that compacts within seconds.
            "kafka": {"bootstrap_servers": self.bootstrap_servers, "partitions": PARTITIONS,
                      "topic_config": dict(FAST_COMPACTION)},
            # Connect's REST can stall for seconds while the group rebalances after a test's delete.
            "connect": {"url": self.connect_url, "heartbeat_interval_ms": 2000, "timeout_s": 30},
            "tables": tables,
            "search": {"kind": self.search_kind, "url": self.search_url, "index_settings": {"number_of_replicas": 0}},
            "redis": {"url": self.redis_url},
        }
        if os.environ.get("CDCKIT_TEST_METRICS_PORT"):  # one per stack lane (tests/support/lanes.py)
            data["metrics_port"] = int(os.environ["CDCKIT_TEST_METRICS_PORT"])
        for key, value in overrides.items():
            data[key] = value
        spark = data["spark"] = dict(data.get("spark") or {})
        conf = spark["conf"] = dict(spark.get("conf") or {})
        conf["spark.driver.extraJavaOptions"] = " ".join(
            o for o in (conf.get("spark.driver.extraJavaOptions", ""), TEST_DRIVER_JVM) if o)
        return data


def docker_reachable() -> bool:
    if os.environ.get("CDCKIT_TEST_WORLD") == "devstack":
        return False
    try:
        import docker

        docker.from_env(timeout=3).ping()
        return True
    except Exception:  # noqa: BLE001 - no engine, no socket, no permission: use the local stack
        return False


@contextmanager
def devstack_world(state_dir: Path, env: dict[str, str] | None = None) -> Iterator[Endpoints]:
    """The local stack, brought up by a process of its own: the background stack starts while unit
    tests run in this one, and those patch module globals and the environment the stack's start reads
    (a test's broken versions.env once failed the whole integration tier). `env`: the environment
    as it was before any test ran."""
    import subprocess
    import sys

    from pipelines.devstack import stack
    from pipelines.devstack.settings import StackSettings

    settings = StackSettings(state_dir=state_dir, ports=dict(TEST_PORTS))
    # `scripts/devstack up`'s own entry point, told the state dir and ports as it reads them
    env = {**(env if env is not None else os.environ), "CDCKIT_DEVSTACK_DIR": str(state_dir),
           "CDCKIT_DEVSTACK_JAVA_OPTIONS": os.environ["CDCKIT_DEVSTACK_JAVA_OPTIONS"],
           **{f"CDCKIT_DEVSTACK_{name.upper()}_PORT": str(port) for name, port in TEST_PORTS.items()}}
    started = subprocess.run([sys.executable, "-m", "pipelines.devstack", "up"], cwd=ROOT, env=env,
                             capture_output=True, text=True)
    if started.returncode != 0:
        stack.down(settings, say=lambda _: None)   # what did start
        raise RuntimeError(f"the local stack did not start: {(started.stderr or started.stdout)[-3000:]}")
    try:
        yield Endpoints("127.0.0.1", settings.ports["postgres"], settings.database, "postgres",
                        settings.bootstrap_servers, settings.connect_url, settings.redis_url,
                        settings.search_url, "opensearch", "devstack", settings=settings)
    finally:
        stack.down(settings, say=lambda _: None)


@contextmanager
def container_world() -> Iterator[Endpoints]:
    """Postgres, Kafka (KRaft), Debezium Connect, Elasticsearch and Redis as containers."""
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.network import Network
    from testcontainers.core.waiting_utils import wait_for_logs
    from testcontainers.elasticsearch import ElasticSearchContainer
    from testcontainers.kafka import KafkaContainer
    from testcontainers.postgres import PostgresContainer
    from testcontainers.redis import RedisContainer

    with Network() as net:
        pg = (PostgresContainer("postgres:15", username="postgres", password="postgres", dbname="cdckit")
              .with_command("postgres -c wal_level=logical -c max_replication_slots=10 -c max_wal_senders=10")
              .with_network(net).with_network_aliases("postgres"))
        kafka = KafkaContainer("confluentinc/cp-kafka:7.7.1").with_kraft().with_network(net) \
            .with_network_aliases("kafka")
        with pg, kafka, RedisContainer("redis:7.2") as redis, \
                ElasticSearchContainer("docker.elastic.co/elasticsearch/elasticsearch:8.15.3") as es:
            connect = (DockerContainer("quay.io/debezium/connect:3.1.1.Final").with_network(net)
                       .with_env("BOOTSTRAP_SERVERS", "kafka:9092").with_env("GROUP_ID", "cdckit-test")
                       .with_env("CONFIG_STORAGE_TOPIC", "cfg").with_env("OFFSET_STORAGE_TOPIC", "off")
                       .with_env("STATUS_STORAGE_TOPIC", "st").with_exposed_ports(8083))
            with connect:
                wait_for_logs(connect, "Finished starting connectors and tasks", timeout=120)
                yield Endpoints(
                    pg.get_container_host_ip(), int(pg.get_exposed_port(5432)), "cdckit", "postgres",
                    kafka.get_bootstrap_server(),
                    f"http://{connect.get_container_host_ip()}:{connect.get_exposed_port(8083)}",
                    f"redis://{redis.get_container_host_ip()}:{redis.get_exposed_port(6379)}/0",
                    es.get_url(), "elasticsearch", "containers", pg_host_for_connect="postgres")


# FAST_COMPACTION makes the cleaner compact a partition again each time a 2 s segment closes: under a
# test's load it re-read and rewrote whole partitions back to back, ~70 % of a core per broker (its
# thread's CPU from /proc: 10 of the broker's 15.6 CPU-min in a 55-min run, two brokers in the lanes).
# A cap on its I/O keeps compaction real and within seconds for a test's topics (the dirtiest log is
# cleaned first), and gives the cores back. Dynamic, in the cluster's metadata: kept across broker restarts.
CLEANER_IO_BYTES_PER_S = 8 << 20


def throttle_log_cleaner(bootstrap_servers: str, bytes_per_s: int = CLEANER_IO_BYTES_PER_S) -> None:
    entry = ConfigEntry("log.cleaner.io.max.bytes.per.second", str(float(bytes_per_s)),
                        incremental_operation=AlterConfigOpType.SET)
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    brokers = admin.list_topics(timeout=30).brokers   # per broker: the client takes no cluster-wide resource
    resources = [ConfigResource(ResourceType.BROKER, str(b), incremental_configs=[entry]) for b in brokers]
    for future in admin.incremental_alter_configs(resources).values():
        future.result(30)


@contextmanager
def provide(state_dir: Path, env: dict[str, str] | None = None) -> Iterator[Endpoints]:
    world = container_world() if docker_reachable() else devstack_world(state_dir, env)
    with world as endpoints:
        try:
            throttle_log_cleaner(endpoints.bootstrap_servers)
        except Exception as exc:  # noqa: BLE001 - a slower suite, not a wrong one
            print(f"the test broker's log cleaner was not capped: {exc}")
        yield endpoints


class BackgroundStack:
    """`provide` entered on a thread of its own, so the servers start while other tests run; the
    first test that needs them waits in `endpoints()`. One per test session."""

    current: "BackgroundStack | None" = None

    def __init__(self, state_dir: Path):
        import threading

        self.state_dir = state_dir
        self.env = dict(os.environ)   # before any test patches it
        self._ready = threading.Event()
        self._release = threading.Event()
        self._endpoints: Endpoints | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="test-stack", daemon=True)

    @classmethod
    def start(cls, state_dir: Path) -> "BackgroundStack":
        cls.current = cls(state_dir)
        cls.current._thread.start()
        return cls.current

    def _run(self) -> None:
        try:
            with provide(self.state_dir, self.env) as endpoints:
                self._endpoints = endpoints
                self._ready.set()
                self._release.wait()
        except BaseException as exc:  # noqa: BLE001 - handed to the test that waits
            self._error = exc
        finally:
            self._ready.set()

    def endpoints(self) -> Endpoints:
        self._ready.wait()
        if self._endpoints is None:
            raise RuntimeError(f"the test stack did not start: {self._error!r}") from self._error
        return self._endpoints

    def stop(self) -> None:
        import shutil

        self._release.set()
        self._thread.join()
        shutil.rmtree(self.state_dir, ignore_errors=True)
        BackgroundStack.current = None
