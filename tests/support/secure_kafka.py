"""A throwaway Apache Kafka broker with a SASL_SSL listener (SCRAM-SHA-512), for tests.

The same jars, java and KRaft format as the local stack's broker (pipelines/devstack/servers.py
Kafka, which this subclasses), in a temp dir of its own on free loopback ports:

- PLAINTEXT on `plain_port`: the inter-broker listener (and what `healthy()` asks);
- CONTROLLER on `plain_port + 1`;
- SASL_SSL on `plain_port + 2`: TLS with a server certificate for 127.0.0.1 and localhost issued
  at start by a fresh `trustme` CA (nothing is committed), SCRAM-SHA-512 logins for one user
  created by `kafka-storage format --add-scram`.

A Kafka Connect worker whose clients all go through the SASL_SSL listener can be started beside it
(`start_connect`). Everything is stopped by pid; logs stay in the temp dir until `stop()`.
"""
from __future__ import annotations

import secrets
import shutil
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.devstack import processes
from pipelines.devstack.connect_layout import worker_properties
from pipelines.devstack.servers import Connect, Kafka, broker_properties, sasl_ssl_listener_settings, scram_format_option
from pipelines.devstack.settings import StackSettings

MECHANISM = "SCRAM-SHA-512"
LISTENER = "SASL_SSL"
USER = "cdckit"


def free_port_run(count: int, start: int = 59500, stop: int = 60900) -> int:
    """The first port of `count` consecutive loopback ports nothing listens on (nor binds)."""
    port = start
    while port + count <= stop:
        taken = next((p for p in range(port, port + count) if not _bindable(p)), None)
        if taken is None:
            return port
        port = taken + 1
    raise RuntimeError(f"no {count} free consecutive loopback ports in {start}-{stop}")


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return not processes.port_in_use(port)


def pkcs8_keystore(cert: Any) -> bytes:
    """A trustme leaf certificate as Kafka's PEM key store file: the private key (PKCS#8, which
    Kafka requires; trustme writes the traditional OpenSSL form) and then the certificate chain."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), password=None)
    pkcs8 = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption())
    return pkcs8 + b"".join(blob.bytes() for blob in cert.cert_chain_pems)


class SecureKafka(Kafka):
    """servers.Kafka plus a SASL_SSL listener and a SCRAM user made at format time."""

    def __init__(self, settings: StackSettings, keystore: Path, user: str, password: str,
                 others: dict[str, str] | None = None, authorizer: bool = False):
        super().__init__(settings)
        self.keystore, self.user, self.password = keystore, user, password
        self.others, self.authorizer = others or {}, authorizer

    @property
    def sasl_port(self) -> int:
        return self.port + 2

    def properties(self) -> str:
        extra = sasl_ssl_listener_settings(LISTENER, self.keystore, MECHANISM)
        if self.authorizer:
            # ACLs decide, except for the broker's own PLAINTEXT listeners (ANONYMOUS) and `user`.
            extra |= {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                      "super.users": f"User:ANONYMOUS;User:{self.user}"}
        return broker_properties(self.port, self.controller_port, self.data,
                                 extra_listeners={LISTENER: ("SASL_SSL", self.sasl_port)}, extra=extra)

    def format_options(self) -> list[str]:
        options = scram_format_option(MECHANISM, self.user, self.password)
        for user, password in self.others.items():
            options += scram_format_option(MECHANISM, user, password)
        return options


class SecureConnect(Connect):
    """servers.Connect whose worker, producer, consumer and admin clients reach `bootstrap` with
    `client` (Java client settings: KafkaConfig.java_client_config()). Its start first drops
    misshapen internal topics through the broker's PLAINTEXT listener, as the stack's does (none
    on a fresh broker)."""

    def __init__(self, settings: StackSettings, bootstrap: str, client: dict[str, Any]):
        super().__init__(settings)
        self.bootstrap, self.client = bootstrap, client

    def worker_properties(self, plugins: Path) -> str:
        return worker_properties(self.bootstrap, self.port, plugins, client=self.client)

    def answers(self) -> bool:
        import requests

        return requests.get(f"{self.s.connect_url}/", timeout=2).ok


@dataclass
class SecureBroker:
    """What a test needs of the running broker."""

    state_dir: Path
    kafka: SecureKafka
    ca_pem: Path  # the CA that signed the broker's certificate
    other_ca_pem: Path  # a CA that did not
    user: str
    password: str
    started: list[Any] = field(default_factory=list)

    @property
    def bootstrap_servers(self) -> str:
        """The SASL_SSL listener."""
        return f"127.0.0.1:{self.kafka.sasl_port}"

    @property
    def plaintext_bootstrap(self) -> str:
        """The inter-broker PLAINTEXT listener (for checks that must not depend on SASL_SSL)."""
        return self.kafka.endpoint()

    def kafka_config(self, **overrides: Any) -> dict[str, Any]:
        """The `kafka:` section of a cdckit config for this broker; the password from the env
        variable CDCKIT_TEST_KAFKA_PW (set it to `password`, or to a wrong one)."""
        return {"bootstrap_servers": self.bootstrap_servers, "security_protocol": "SASL_SSL",
                "sasl_mechanism": MECHANISM, "sasl_username": self.user,
                "sasl_password": {"env": "CDCKIT_TEST_KAFKA_PW"}, "ssl_ca_location": str(self.ca_pem),
                **overrides}

    def start_connect(self, client: dict[str, Any], timeout_s: float = 240) -> SecureConnect:
        port = free_port_run(1, start=self.kafka.sasl_port + 1)
        settings = StackSettings(state_dir=self.state_dir, ports={"kafka": self.kafka.port, "connect": port})
        connect = SecureConnect(settings, self.bootstrap_servers, client)
        connect.start()
        self.started.append(connect)
        if not processes.wait_until(connect.answers, timeout_s, interval_s=1):
            raise RuntimeError(f"Kafka Connect did not answer on {settings.connect_url} within {timeout_s:.0f} s:\n"
                               f"{processes.log_tail(connect.log, 40)}")
        return connect

    def stop(self) -> None:
        for server in reversed([self.kafka, *self.started]):
            server.stop()


def start_secure_kafka(timeout_s: float = 180, others: dict[str, str] | None = None,
                       authorizer: bool = False) -> SecureBroker:
    """Start the broker (a minute on a busy machine); the caller must call `stop()` (and may then
    remove `state_dir`). `others`: more SCRAM users (name -> password); `authorizer`: ACLs apply to
    everyone but the main user."""
    import trustme

    state = Path(tempfile.mkdtemp(prefix="cdckit-secure-kafka-"))
    tls = state / "tls"
    tls.mkdir()
    ca, other = trustme.CA(), trustme.CA()
    ca.cert_pem.write_to_path(str(tls / "ca.pem"))
    other.cert_pem.write_to_path(str(tls / "other-ca.pem"))
    keystore = tls / "broker-keystore.pem"
    keystore.write_bytes(pkcs8_keystore(ca.issue_cert("127.0.0.1", "localhost")))
    keystore.chmod(0o600)
    password = secrets.token_urlsafe(18).replace("-", "x").replace("_", "y")
    port = free_port_run(3)  # PLAINTEXT, CONTROLLER, SASL_SSL
    kafka = SecureKafka(StackSettings(state_dir=state, ports={"kafka": port}), keystore, USER, password,
                        others, authorizer)
    broker = SecureBroker(state, kafka, tls / "ca.pem", tls / "other-ca.pem", USER, password)
    try:
        kafka.start()
        if not processes.wait_until(kafka.healthy, timeout_s, interval_s=1):
            raise RuntimeError(f"the secure Kafka broker did not answer within {timeout_s:.0f} s:\n"
                               f"{processes.log_tail(kafka.log, 40)}")
    except BaseException:
        broker.stop()
        shutil.rmtree(state, ignore_errors=True)
        raise
    return broker
