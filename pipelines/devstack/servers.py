"""One class per local-stack server: how to start it, how to tell it answers, how to stop it."""
from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from pathlib import Path

import requests

from pipelines.devstack import processes
from pipelines.devstack.connect_layout import assemble, worker_properties
from pipelines.devstack.packages import osmem_binary, postgres_binary, system_binary, tansu_binary
from pipelines.devstack.settings import StackSettings


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

    def start(self) -> None:
        self.prepare()
        processes.spawn(self.argv(), self.log, self.pid_file, cwd=self.home)

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

    def stop(self) -> bool:
        if self.pid() is None:
            return False
        subprocess.run(self._as_user(postgres_binary("pg_ctl"), "-D", self.data, "-m", "fast", "-w", "stop"),
                       capture_output=True)
        return True


class Kafka(Server):
    """Tansu, a Kafka-API broker keeping everything in memory (a restart loses every topic)."""

    name = "kafka"

    def argv(self) -> list[str]:
        url = f"tcp://127.0.0.1:{self.port}"
        return [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]

    def healthy(self) -> bool:
        from confluent_kafka.admin import AdminClient

        AdminClient({"bootstrap.servers": self.endpoint(), "log_level": 0}).list_topics(timeout=2)
        return True


class Connect(Server):
    """Kafka Connect 3.9 (distributed mode) with the Debezium Postgres plugin."""

    name = "connect"

    def argv(self) -> list[str]:
        java = system_binary("java", self.name, "openjdk-17-jre-headless")
        return [str(java), "-Xms256m", "-Xmx1g", "-XX:+UseG1GC", "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={self.home / 'log4j2.properties'}",
                "-cp", f"{self.home / 'lib'}/*", "org.apache.kafka.connect.cli.ConnectDistributed",
                str(self.home / "worker.properties")]

    def check_installed(self) -> None:
        self.argv()
        assemble(self.home)

    def prepare(self) -> None:
        super().prepare()
        _, plugins = assemble(self.home)
        (self.home / "worker.properties").write_text(
            worker_properties(self.s.bootstrap_servers, self.port, plugins))
        # The wheel ships log4j 2 (log4j-core + slf4j2 binding): a log4j2 properties file.
        (self.home / "log4j2.properties").write_text(
            "status = warn\nappender.out.type = Console\nappender.out.name = out\n"
            "appender.out.layout.type = PatternLayout\nappender.out.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = info\nrootLogger.appenderRef.out.ref = out\n"
            "logger.clients.name = org.apache.kafka.clients\nlogger.clients.level = warn\n"
            "logger.reflections.name = org.reflections\nlogger.reflections.level = error\n")

    def start(self) -> None:
        self.prepare()
        _drop_misshapen_internal_topics(self.s.bootstrap_servers)
        processes.spawn(self.argv(), self.log, self.pid_file, cwd=self.home)

    def healthy(self) -> bool:
        resp = requests.get(f"{self.s.connect_url}/connector-plugins", timeout=2)
        return resp.ok and any("PostgresConnector" in p.get("class", "") for p in resp.json())

    def endpoint(self) -> str:
        return self.s.connect_url


def _drop_misshapen_internal_topics(bootstrap: str, group: str = "cdckit-connect") -> None:
    """After Tansu restarts empty, a Connect worker that was still running re-creates its internal
    topics through metadata requests, with broker defaults (several partitions, no compaction); a new
    worker then refuses to start. Such topics hold nothing of value: drop them so Connect recreates
    them right."""
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
        return [str(binary), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", str(self.home), "--protected-mode", "no"]

    def healthy(self) -> bool:
        import redis

        return bool(redis.Redis(port=self.port, socket_timeout=2).ping())


class Search(Server):
    """osmem-server: an in-memory OpenSearch-API server (keeps nothing across restarts)."""

    name = "search"

    def argv(self) -> list[str]:
        return [str(osmem_binary()), "-addr", f"127.0.0.1:{self.port}", "-no-stdin-watch"]

    def healthy(self) -> bool:
        return requests.get(f"{self.s.search_url}/", timeout=2).ok

    def endpoint(self) -> str:
        return self.s.search_url


SERVERS: tuple[type[Server], ...] = (Postgres, Kafka, Redis, Search, Connect)


def wipe(settings: StackSettings) -> None:
    if settings.state_dir.exists():
        shutil.rmtree(settings.state_dir)
