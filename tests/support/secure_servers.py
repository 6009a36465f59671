"""Throwaway servers that speak only TLS, with certificates made at run time by `trustme` (never
committed): a PostgreSQL that refuses unencrypted and password-less logins, and a Redis with a TLS
port only and an ACL user. Each runs from a temp dir on a free loopback port and is stopped by PID."""
from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from pipelines.devstack.packages import postgres_binary, system_binary
from tests.support.ports import free_port


@dataclass
class Certificates:
    ca: Path            # the CA that signed the servers' certificate
    other_ca: Path      # a CA that signed nothing here: "unknown CA"
    cert: Path
    key: Path


def make_certificates(folder: Path) -> Certificates:
    import trustme

    ca, other = trustme.CA(), trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    paths = Certificates(folder / "ca.pem", folder / "other-ca.pem", folder / "server.pem", folder / "server.key")
    ca.cert_pem.write_to_path(str(paths.ca))
    other.cert_pem.write_to_path(str(paths.other_ca))
    server.cert_chain_pems[0].write_to_path(str(paths.cert))
    server.private_key_pem.write_to_path(str(paths.key))
    return paths


def _wait(check, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise TimeoutError(f"{what} did not start within {timeout_s} s")


def _answers(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.3)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class TlsPostgres:
    port: int
    user: str
    password: str
    database: str = "postgres"
    socket_dir: Path | None = None  # the superuser `postgres` logs in here without a password

    def superuser(self):
        import psycopg

        return psycopg.connect(host=str(self.socket_dir), port=self.port, user="postgres", dbname=self.database,
                               autocommit=True)


@contextmanager
def tls_postgres(certs: Certificates, user: str = "cdckit_tls", password: str = "tls-secret-1",
                 logical: bool = False) -> Iterator[TlsPostgres]:
    """ssl=on; loopback logins only over TLS and with a password (scram); plaintext is rejected.
    `logical`: wal_level=logical, and replication connections (Debezium's) allowed the same way."""
    home = Path(tempfile.mkdtemp(prefix="cdckit-tls-pg-"))
    owner = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
    as_owner = ["runuser", "-u", "postgres", "--"] if owner else []
    data, port = home / "data", free_port()
    for path in (certs.cert, certs.key):
        shutil.copy(path, home / path.name)
    if owner:
        for path in (home, home / certs.cert.name, home / certs.key.name):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    (home / certs.key.name).chmod(0o600)
    run = lambda *argv: subprocess.run([*as_owner, *map(str, argv)], check=True, capture_output=True)  # noqa: E731
    run(postgres_binary("initdb"), "-D", data, "-U", "postgres", "--auth-local=trust", "--auth-host=reject")
    (data / "pg_hba.conf").write_text(
        "local all all trust\n"
        "hostssl all all 127.0.0.1/32 scram-sha-256\n"
        "hostssl replication all 127.0.0.1/32 scram-sha-256\n"
        "hostnossl all all 127.0.0.1/32 reject\n")
    with open(data / "postgresql.conf", "a") as conf:
        conf.write(f"\nlisten_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{home}'\n"
                   f"ssl = on\nssl_cert_file = '{home / certs.cert.name}'\nssl_key_file = '{home / certs.key.name}'\n")
        if logical:
            conf.write("wal_level = logical\nmax_replication_slots = 4\nmax_wal_senders = 4\n")
    run(postgres_binary("pg_ctl"), "-D", data, "-l", home / "log", "-w", "start")
    try:
        run(postgres_binary("psql"), "-h", home, "-p", port, "-U", "postgres", "-c",
            f"CREATE ROLE {user} LOGIN PASSWORD '{password}'")
        _wait(lambda: _answers(port), 30, "postgres")
        yield TlsPostgres(port, user, password, socket_dir=home)
    finally:
        subprocess.run([*as_owner, str(postgres_binary("pg_ctl")), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


@dataclass
class TlsRedis:
    port: int
    user: str
    password: str


@contextmanager
def tls_redis(certs: Certificates, user: str = "cdckit", password: str = "tls-secret-2") -> Iterator[TlsRedis]:
    """A TLS port only (no plaintext port), clients not asked for certificates, one ACL user and
    the default user off."""
    home = Path(tempfile.mkdtemp(prefix="cdckit-tls-redis-"))
    port = free_port()
    (home / "redis.conf").write_text(
        f"port 0\ntls-port {port}\nbind 127.0.0.1\ndir {home}\nsave \"\"\nappendonly no\n"
        f"tls-cert-file {certs.cert}\ntls-key-file {certs.key}\ntls-ca-cert-file {certs.ca}\ntls-auth-clients no\n"
        f"user default off\nuser {user} on >{password} ~* &* +@all\n")
    proc = subprocess.Popen([str(system_binary("redis-server", "redis", "redis-server")), str(home / "redis.conf")],
                            stdout=open(home / "log", "wb"), stderr=subprocess.STDOUT)
    try:
        _wait(lambda: _answers(port) or proc.poll() is not None, 30, "redis")
        if proc.poll() is not None:
            raise RuntimeError(f"redis-server exited: {(home / 'log').read_text()[-1000:]}")
        yield TlsRedis(port, user, password)
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(home, ignore_errors=True)


@dataclass
class TlsSearch:
    url: str
    user: str
    password: str


@contextmanager
def tls_search(certs: Certificates, user: str = "cdckit", password: str = "tls-secret-3") -> Iterator[TlsSearch]:
    """The search engine behind HTTPS with basic auth. Neither engine of the local stack does TLS
    itself (osmem-server cannot; the OpenSearch node runs without its security plugin), so this is
    the usual production shape of a proxy in front: TLS and auth checked here, the API the engine's."""
    import base64
    import http.client
    import ssl
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from pipelines.devstack.packages import osmem_binary

    engine_port = free_port()
    engine = subprocess.Popen([str(osmem_binary()), "-addr", f"127.0.0.1:{engine_port}", "-no-stdin-watch"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    hop = {"connection", "keep-alive", "transfer-encoding", "content-length"}

    class Proxy(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def _forward(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="search"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            upstream = http.client.HTTPConnection("127.0.0.1", engine_port, timeout=30)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in hop | {"authorization", "host"}}
            upstream.request(self.command, self.path, body=body or None, headers=headers)
            resp = upstream.getresponse()
            data = resp.read()
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in hop:
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            upstream.close()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Proxy)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(certs.cert), str(certs.key))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    try:
        _wait(lambda: _answers(engine_port), 30, "osmem-server")
        thread.start()
        yield TlsSearch(f"https://127.0.0.1:{server.server_address[1]}", user, password)
    finally:
        server.shutdown()
        server.server_close()
        engine.terminate()
        engine.wait(10)
