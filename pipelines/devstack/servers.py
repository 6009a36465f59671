"""One class per local-stack server: how to start it, how to tell it answers, how to stop it."""
from __future__ import annotations

import base64
import os
import pwd
import re
import shutil
import subprocess
import uuid
from collections.abc import Mapping
from pathlib import Path

import requests

from pipelines.devstack import processes
from pipelines.devstack.connect_layout import assemble, properties_text, worker_properties
from pipelines.devstack.jars import component_dir, jar_version
from pipelines.devstack.packages import MissingPackage, check_major, postgres_binary, system_binary
from pipelines.devstack.settings import StackSettings


def kraft_cluster_id() -> str:
    """A random KRaft cluster id as Kafka makes them: one starting with '-' reads as an option."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def java_options() -> list[str]:
    """More options for the stack's JVM servers (CDCKIT_DEVSTACK_JAVA_OPTIONS, split on spaces): the
    test suite's stacks run C1 only (tests/support/stack.py says why)."""
    return os.environ.get("CDCKIT_DEVSTACK_JAVA_OPTIONS", "").split()


class Server:
    name = ""
    pid_name = ""

    def __init__(self, settings: StackSettings):
        self.s = settings

    @property
    def port(self) -> int:
        return self.s.ports[self.name]

    @property
    def log(self) -> Path:
        return self.s.log(self.name)

    @property
    def home(self) -> Path:
        return self.s.state_dir / self.name

    @property
    def pid_file(self) -> Path:
        return self.s.run / f"{self.name}.pid"

    def check_installed(self) -> None:
        self.argv()

    def argv(self) -> list[str]:
        raise NotImplementedError

    def prepare(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)

    def pid(self) -> int | None:
        return processes.recorded_pid(self.pid_file)

    def env(self) -> dict[str, str] | None:
        """Environment variables the server needs beside this process's own."""
        return None

    def start(self) -> None:
        self.prepare()
        processes.spawn(self.argv(), self.log, self.pid_file, env=self.env(), cwd=self.home)

    def healthy(self) -> bool:
        raise NotImplementedError

    def after_healthy(self) -> None:
        """One-off setup once the server answers (idempotent)."""

    def stop(self) -> bool:
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        processes.terminate(pid)
        self.pid_file.unlink(missing_ok=True)
        return True

    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def version(self) -> str:
        """What runs there, for `devstack status` (from the installed packages, no request)."""
        return ""


class Postgres(Server):
    """A private cluster run by the postgres user (initdb refuses root)."""

    name = "postgres"
    user = "postgres"

    @property
    def data(self) -> Path:
        return self.home / "data"

    def _as_user(self, *argv: str | Path) -> list[str]:
        cmd = [str(a) for a in argv]
        if os.geteuid() == 0:
            return ["runuser", "-u", self.user, "--", *cmd]
        return cmd

    def argv(self) -> list[str]:
        return [str(postgres_binary("pg_ctl"))]

    def prepare(self) -> None:
        super().prepare()
        postgres_binary("initdb")
        if os.geteuid() == 0:
            uid, gid = pwd.getpwnam(self.user).pw_uid, pwd.getpwnam(self.user).pw_gid
            # The postgres user must reach its data dir through every parent.
            for parent in [self.home, *self.home.parents]:
                if parent == Path("/"):
                    break
                mode = parent.stat().st_mode
                if not mode & 0o001:
                    parent.chmod(mode | 0o001)
            os.chown(self.home, uid, gid)
            self.log.parent.mkdir(parents=True, exist_ok=True)
            self.log.touch()
            os.chown(self.log, uid, gid)
        if not (self.data / "PG_VERSION").exists():
            subprocess.run(self._as_user(postgres_binary("initdb"), "-D", self.data, "--auth=trust",
                                         "-U", "postgres", "-E", "UTF8", "--locale=C"),
                           check=True, capture_output=True)
            sock = self.home / "sock"
            sock.mkdir(exist_ok=True)
            if os.geteuid() == 0:
                os.chown(sock, pwd.getpwnam(self.user).pw_uid, pwd.getpwnam(self.user).pw_gid)
            with open(self.data / "postgresql.conf", "a") as conf:
                conf.write("\n# cdckit local stack\n"
                           f"listen_addresses = '127.0.0.1'\nunix_socket_directories = '{sock}'\n"
                           "wal_level = logical\nmax_replication_slots = 10\nmax_wal_senders = 10\n"
                           "max_connections = 100\nshared_buffers = 256MB\n")
        (self.data / "postgresql.auto.conf").write_text(f"port = {self.port}\n")
        self._password_logins()

    PASSWORD_GROUP = "cdckit_password_login"

    def _password_logins(self) -> None:
        """Loopback is trusted, except for members of this group: they must give their password
        (scram), so a test can tell that Connect resolved a password reference."""
        hba = self.data / "pg_hba.conf"
        line = f"host all +{self.PASSWORD_GROUP} 127.0.0.1/32 scram-sha-256\n"
        text = hba.read_text()
        if line not in text:
            hba.write_text(line + text)  # first: pg_hba's first matching line decides

    def start(self) -> None:
        self.prepare()
        subprocess.run(self._as_user(postgres_binary("pg_ctl"), "-D", self.data, "-l", self.log, "-W", "start"),
                       check=True, capture_output=True)

    def pid(self) -> int | None:
        try:
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if processes.alive(pid) else None

    def version(self) -> str:
        return "PostgreSQL 15"

    def healthy(self) -> bool:
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres",
                             connect_timeout=2):
            return True

    def after_healthy(self) -> None:
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres",
                             autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (self.s.database,)).fetchone():
                conn.execute(f'CREATE DATABASE "{self.s.database}"')
            if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (self.PASSWORD_GROUP,)).fetchone():
                conn.execute(f"CREATE ROLE {self.PASSWORD_GROUP} NOLOGIN")

    def stop(self) -> bool:
        if self.pid() is None:
            return False
        subprocess.run(self._as_user(postgres_binary("pg_ctl"), "-D", self.data, "-m", "fast", "-w", "stop"),
                       capture_output=True)
        return True


class Kafka(Server):
    """Apache Kafka (KRaft, one combined broker and controller) with its log on disk: a restart
    keeps every topic, compacted topics are really compacted, and a keyless record on a compacted
    topic is refused, as in production."""

    name = "kafka"

    @property
    def controller_port(self) -> int:
        return self.port + 1

    @property
    def data(self) -> Path:
        return self.home / "data"

    def _java(self, main: str, *args: str, heap: str = "-Xmx768m") -> list[str]:
        java = system_binary("java", self.name, "openjdk-17-jre-headless")
        return [str(java), heap, "-XX:+UseG1GC", *java_options(), "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={self.home / 'log4j2.properties'}",
                "-cp", f"{component_dir('kafka')}/*", main, *args]

    def argv(self) -> list[str]:
        return self._java("kafka.Kafka", str(self.home / "server.properties"))

    def check_installed(self) -> None:
        super().check_installed()
        if self.pid() is None and processes.port_in_use(self.controller_port):
            raise MissingPackage(self.name, f"a free controller port ({self.controller_port} is taken)")

    def properties(self) -> str:
        """server.properties (a subclass may add listeners: tests/support/secure_kafka.py)."""
        return broker_properties(self.port, self.controller_port, self.data)

    def format_options(self) -> list[str]:
        """More options of the one-off `kafka-storage format` (e.g. --add-scram users)."""
        return []

    def prepare(self) -> None:
        super().prepare()
        (self.home / "server.properties").write_text(self.properties())
        _log4j2(self.home, quiet=("kafka.log.LogCleaner", "org.apache.kafka.storage.internals.log",
                                  "kafka.coordinator", "org.apache.kafka.coordinator"))
        if not (self.data / "meta.properties").exists():
            # KRaft needs its log directory formatted once with a cluster id.
            cluster_id = kraft_cluster_id()
            subprocess.run(self._java("kafka.tools.StorageTool", "format", "--standalone", "-t", cluster_id,
                                      "-c", str(self.home / "server.properties"), *self.format_options(),
                                      heap="-Xmx256m"),
                           check=True, capture_output=True)

    def healthy(self) -> bool:
        from confluent_kafka.admin import AdminClient

        md = AdminClient({"bootstrap.servers": self.endpoint(), "log_level": 0}).list_topics(timeout=2)
        return bool(md.brokers)

    def version(self) -> str:
        return f"Apache Kafka {jar_version('kafka', 'kafka_2.13') or '?'} (KRaft)"


def broker_properties(port: int, controller_port: int, data: Path,
                      extra_listeners: Mapping[str, tuple[str, int]] | None = None,
                      extra: Mapping[str, str] | None = None) -> str:
    """A combined broker and controller on loopback. PLAINTEXT on `port` stays the inter-broker
    listener; `extra_listeners` (name -> (security protocol, port)) are served and advertised
    beside it, set up by `extra` (e.g. sasl_ssl_listener_settings)."""
    served = {"PLAINTEXT": ("PLAINTEXT", port), **(extra_listeners or {})}
    if "CONTROLLER" in served:
        raise ValueError("CONTROLLER is the controller's listener")
    advertised = ",".join(f"{name}://127.0.0.1:{p}" for name, (_, p) in served.items())
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
        "listeners": f"{advertised},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": advertised,
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": ",".join(f"{name}:{protocol}" for name, (protocol, _) in served.items())
                                          + ",CONTROLLER:PLAINTEXT",
        "log.dirs": str(data),
        # Topics are created on purpose (Debezium, Connect, cdckit), never by a stray metadata request.
        "auto.create.topics.enable": "false",
        "num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "5",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        # The cleaner looks for dirty logs every second (default 15 s): a topic created with small
        # segments and a low dirty ratio is compacted within seconds, which tests rely on.
        "log.cleaner.backoff.ms": "1000",
        "log.retention.check.interval.ms": "5000",
        **(extra or {}),
    }
    return properties_text(props)


SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def sasl_ssl_listener_settings(listener: str, keystore: Path, mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
    """Broker settings of a SASL_SSL listener: TLS with a PEM key store (the private key, PKCS#8
    and unencrypted, then the certificate chain, in one file) and SCRAM logins checked against the
    credentials in the cluster metadata (`kafka-storage format --add-scram`, or the Admin API).
    No client certificates. The listener only authenticates: the broker has no authorizer."""
    if not mechanism.startswith("SCRAM-"):
        raise ValueError(f"only SCRAM mechanisms are stored by the broker, not {mechanism}")
    prefix = f"listener.name.{listener.lower()}."
    return {
        f"{prefix}sasl.enabled.mechanisms": mechanism,
        # Server side: no user of its own (inter-broker traffic stays on PLAINTEXT).
        f"{prefix}{mechanism.lower()}.sasl.jaas.config": f"{SCRAM_LOGIN_MODULE} required;",
        f"{prefix}ssl.keystore.type": "PEM",
        f"{prefix}ssl.keystore.location": str(keystore),
        f"{prefix}ssl.client.auth": "none",
    }


def scram_format_option(mechanism: str, user: str, password: str) -> list[str]:
    """`kafka-storage format` options creating a SCRAM user with the cluster (KRaft)."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", user) or not re.fullmatch(r"[A-Za-z0-9_.@%+-]+", password):
        # The option's [name=...,password=...] syntax has no quoting for ',', ']', '=' or spaces.
        raise ValueError("SCRAM user names and passwords here are letters, digits and _.-@%+ only")
    return ["--add-scram", f"{mechanism}=[name={user},password={password}]"]


def _log4j2(home: Path, quiet: tuple[str, ...] = ()) -> None:
    """A log4j 2 config: INFO to the console (the server's log file), `quiet` loggers at WARN."""
    lines = ["status = warn", "appender.out.type = Console", "appender.out.name = out",
             "appender.out.layout.type = PatternLayout", "appender.out.layout.pattern = [%d] %p %m (%c)%n",
             "rootLogger.level = info", "rootLogger.appenderRef.out.ref = out"]
    for i, name in enumerate(("org.apache.kafka.clients", "org.reflections", *quiet)):
        lines += [f"logger.q{i}.name = {name}", f"logger.q{i}.level = warn"]
    (home / "log4j2.properties").write_text("\n".join(lines) + "\n")


class Connect(Server):
    """Kafka Connect (distributed mode) with the Debezium Postgres plugin."""

    name = "connect"

    def argv(self) -> list[str]:
        java = system_binary("java", self.name, "openjdk-17-jre-headless")
        return [str(java), "-Xms256m", "-Xmx1g", "-XX:+UseG1GC", *java_options(), "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={self.home / 'log4j2.properties'}",
                "-cp", f"{component_dir('connect')}/*", "org.apache.kafka.connect.cli.ConnectDistributed",
                str(self.home / "worker.properties")]

    def check_installed(self) -> None:
        self.argv()
        assemble(self.home)

    def worker_properties(self, plugins: Path) -> str:
        """worker.properties (a subclass may set the clients' security: tests/support/secure_kafka.py)."""
        return worker_properties(self.s.bootstrap_servers, self.port, plugins)

    def prepare(self) -> None:
        super().prepare()
        _, plugins = assemble(self.home)
        (self.home / "worker.properties").write_text(self.worker_properties(plugins))
        _log4j2(self.home)

    def start(self) -> None:
        self.prepare()
        _drop_misshapen_internal_topics(self.s.bootstrap_servers)
        processes.spawn(self.argv(), self.log, self.pid_file, cwd=self.home)

    def healthy(self) -> bool:
        resp = requests.get(f"{self.s.connect_url}/connector-plugins", timeout=2)
        return resp.ok and any("PostgresConnector" in p.get("class", "") for p in resp.json())

    def endpoint(self) -> str:
        return self.s.connect_url

    def version(self) -> str:
        return (f"Kafka Connect {jar_version('connect', 'connect-runtime') or '?'}, Debezium Postgres "
                f"{jar_version('debezium', 'debezium-connector-postgres') or '?'}")


def _drop_misshapen_internal_topics(bootstrap: str, group: str = "cdckit-connect") -> None:
    """Connect's internal topics must be compacted (and the config topic single-partition), or a
    new worker refuses to start. Topics of the wrong shape (made by hand, or by an older stack whose
    broker re-created them with its defaults) hold nothing a worker can use: drop them so Connect
    recreates them right."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    md = admin.list_topics(timeout=10).topics
    wrong = []
    for kind in ("configs", "offsets", "status"):
        topic = f"{group}-{kind}"
        if topic not in md:
            continue
        entries = list(admin.describe_configs([ConfigResource("topic", topic)]).values())[0].result(10)
        policy = entries.get("cleanup.policy")
        compact = policy is not None and "compact" in (policy.value or "")
        if not compact or (kind == "configs" and len(md[topic].partitions) != 1):
            wrong.append(topic)
    if wrong:
        for fut in admin.delete_topics(wrong).values():
            fut.result(10)


class Redis(Server):
    name = "redis"

    def argv(self) -> list[str]:
        binary = system_binary("redis-server", self.name, "redis-server")
        check_major(binary, self.name, "REDIS_MAJOR", "redis-server")
        return [str(binary), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", str(self.home), "--protected-mode", "no"]

    def healthy(self) -> bool:
        import redis

        return bool(redis.Redis(port=self.port, socket_timeout=2).ping())

    def version(self) -> str:
        return "Redis"


def wipe(settings: StackSettings) -> None:
    if settings.state_dir.exists():
        shutil.rmtree(settings.state_dir)
