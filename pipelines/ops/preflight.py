"""Before anything starts: every server the command needs answers, and accepts our credentials.

A wrong password or an unreachable host is refused here, naming the endpoint and the config fields
to fix, instead of surfacing minutes later as a failed Spark task.
"""
from __future__ import annotations

import logging
import re
import time

from pipelines.config import Config, KafkaConfig
from pipelines.errors import CdckitError, CredentialsRefused, EndpointUnreachable, SecurityMismatch

log = logging.getLogger("cdckit.preflight")


def check_servers(config: Config) -> None:
    """Kafka and the stores the config writes answer and accept our credentials. The database is
    check_database's."""
    _kafka(config)
    if "search" in config.sinks:
        _search(config)
    if "cache" in config.sinks:
        _redis(config)


def check_database(config: Config, required: bool = True) -> None:
    """The configured tables against the database (pipelines/ops/table_checks.py) and, when
    `required`, the user's privileges (pipelines/ops/privileges.py). Not `required` (the streaming
    job does not need the database): an unreachable database is a warning, and its tables are
    checked when it answers."""
    from connectors.postgres import PostgresUnreachable
    from pipelines.ops import privileges
    from pipelines.ops.table_checks import check_database_tables

    try:
        check_database_tables(config)
        if required:
            privileges.require(config)
    except PostgresUnreachable as exc:
        if required:
            raise
        log.warning("tables not checked against the database (%s)", exc)


def _kafka(config: Config, timeout_s: float = 8.0) -> None:
    from confluent_kafka import KafkaException

    from connectors.kafka import clients

    # librdkafka says why a connection failed only to the error callback (TLS, SASL) or in an
    # INFO log line (a listener that drops the connection: another protocol); list_topics itself
    # ends with a generic transport error. A refusal that says what is wrong ends the wait at once;
    # a broker that does not answer (yet) is given up to `timeout_s`, as one starting may need.
    seen: list[str] = []
    admin = clients.admin(config.kafka.client_config(), socket_connection_setup_timeout_ms=5000,
                          error_cb=lambda err: seen.append(err.str()), log_level=6, logger=_FailureLines(seen))
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            admin.list_topics(timeout=1)
            return
        except KafkaException as exc:
            failure = str(exc)
        admin.poll(0.2)  # serves the error callbacks
        refusal = kafka_refusal(config.kafka, [*seen, failure])
        if not isinstance(refusal, EndpointUnreachable) or time.monotonic() >= deadline:
            raise refusal


class _FailureLines(logging.Logger):
    """librdkafka's log lines about failed connections (facility FAIL), kept; the rest dropped."""

    def __init__(self, into: list[str]):
        super().__init__("cdckit.preflight.librdkafka", logging.INFO)
        self.into = into

    def log(self, level, msg, *args, **kwargs):  # confluent-kafka calls (level, fmt, facility, name, text)
        if len(args) == 3 and args[0] == "FAIL":
            self.into.append(str(args[2]))


# What librdkafka says, and what it means for the config: the first kind any message matches wins.
_KAFKA_MECHANISM = re.compile(r"unsupported SASL mechanism|SASL mechanism \S+ not supported", re.I)
_KAFKA_CREDENTIALS = re.compile(r"SASL authentication|authentication failed|invalid credentials|"
                                r"SaslAuthenticate|uthentication", re.I)
_KAFKA_HOSTNAME = re.compile(r"hostname mismatch|hostname verification|does not match (the )?(host|IP)", re.I)
_KAFKA_CERTIFICATE = re.compile(r"certificate verify failed|could not be verified|self[- ]signed certificate|"
                                r"unable to get (local )?issuer certificate|unknown ca", re.I)
# A listener of another protocol drops the connection before it answers the first request
# (librdkafka 2.16: "Disconnected: connection closed by peer: ... in state APIVERSION_QUERY"; older
# ones added a hint naming security.protocol).
_KAFKA_PROTOCOL = re.compile(r"security\.protocol|PLAINTEXT broker listener|wrong version number|"
                             r"SSL handshake failed: Disconnected|packet length too long|record layer failure|"
                             r"Disconnected\b.*\bin state APIVERSION_QUERY", re.I)
# A SASL listener closes a connection that sends requests without logging in first (right after
# ApiVersion, which it answers): librdkafka is UP, then disconnected.
_KAFKA_WANTS_SASL = re.compile(r"Disconnected\b.*closed by peer.*\bin state UP\b", re.I)
# "[thrd:...]: sasl_ssl://127.0.0.1:9093/bootstrap: " before librdkafka's messages (the thread in
# log lines only): the endpoint is named already.
_BROKER_PREFIX = re.compile(r"^(?:\[thrd:[^\]]*\]: )?(?:\w+://)?[^\s/]+/(?:bootstrap|\d+): ")
_STATE_SUFFIX = re.compile(r" \(after \d+ms in state \w+(?:, \d+ identical error\(s\) suppressed)?\)$")


def _librdkafka_detail(message: str) -> str:
    return _short(_STATE_SUFFIX.sub("", _BROKER_PREFIX.sub("", message.strip())))


def kafka_refusal(kafka: KafkaConfig, messages: list[str]) -> CdckitError:
    """One line naming the endpoint and the config fields to fix, from librdkafka's messages about
    a failed connection (error callbacks, then the exception)."""
    def first(pattern: re.Pattern) -> str | None:
        return next((_librdkafka_detail(m) for m in messages if pattern.search(m)), None)

    where = ("Kafka", kafka.bootstrap_servers)
    if (detail := first(_KAFKA_MECHANISM)) is not None:
        return SecurityMismatch(*where, f"does not offer SASL mechanism {kafka.sasl_mechanism}",
                                "kafka.sasl_mechanism", detail)
    if (detail := first(_KAFKA_CREDENTIALS)) is not None:
        return CredentialsRefused(*where, "kafka.sasl_username / kafka.sasl_password", detail)
    if (detail := first(_KAFKA_HOSTNAME)) is not None:
        return SecurityMismatch(*where, "presents a TLS certificate for another host name",
                                "kafka.bootstrap_servers / kafka.ssl_ca_location", detail)
    if (detail := first(_KAFKA_CERTIFICATE)) is not None:
        ca = f"the CA in {kafka.ssl_ca_location}" if kafka.ssl_ca_location else "the system's CAs"
        return SecurityMismatch(*where, f"presents a TLS certificate that {ca} did not sign",
                                "kafka.ssl_ca_location", detail)
    if (detail := first(_KAFKA_PROTOCOL)) is not None:
        return SecurityMismatch(*where, f"does not speak {kafka.security_protocol} on that port",
                                "kafka.security_protocol", detail)
    if not kafka.security_protocol.startswith("SASL") and (detail := first(_KAFKA_WANTS_SASL)) is not None:
        return SecurityMismatch(*where, f"closed the {kafka.security_protocol} connection before any request: the "
                                "listener may expect a SASL login", "kafka.security_protocol, kafka.sasl_*", detail)
    last = next((m for m in reversed(messages) if m.strip()), "")
    return EndpointUnreachable(*where, _librdkafka_detail(last))


def _search(config: Config) -> None:
    from pipelines.apply.stores import search_engine

    engine = search_engine(config)
    try:
        engine.client.info()
    except Exception as exc:  # noqa: BLE001 - either client library's connection and HTTP errors
        status = getattr(exc, "status_code", None) or getattr(getattr(exc, "meta", None), "status", None)
        if status in (401, 403):
            raise CredentialsRefused("search", config.search.url, "search.username / search.password or "
                                     "search.api_key", f"HTTP {status}") from None
        if isinstance(status, int):
            return  # it answers; other statuses on / (some proxies) are not our concern here
        raise _unreachable("search", config.search.url, _short(f"{type(exc).__name__}: {exc}"), _chained(exc)) \
            from None


def _redis(config: Config) -> None:
    import redis

    from pipelines.apply.stores import redis_client

    try:
        redis_client(config).ping()
    except redis.AuthenticationError as exc:
        raise CredentialsRefused("redis", config.redis.url, "redis.username / redis.password", _short(str(exc))) \
            from None
    except redis.ResponseError as exc:
        if "AUTH" in str(exc) or "NOAUTH" in str(exc) or "WRONGPASS" in str(exc):
            raise CredentialsRefused("redis", config.redis.url, "redis.username / redis.password",
                                     _short(str(exc))) from None
        raise
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise _unreachable("redis", config.redis.url, _short(str(exc)), str(exc)) from None


# What a TLS mismatch looks like from the client -> what it means and the config fields to check.
_TLS_REFUSALS = (
    (("CERTIFICATE_VERIFY_FAILED", "certificate verify failed"),
     "presented a certificate the configured CA does not vouch for", "{s}.ca_certs"),
    (("WRONG_VERSION_NUMBER", "wrong version number", "record layer failure"),
     "does not speak TLS", "{s}.url: {plain} for plaintext"),
    (("Connection closed by server", "Connection reset by peer", "Error while reading from socket",
      "Connection aborted", "RemoteDisconnected"),
     "closed the connection (a TLS-only port?)", "{s}.url: {tls} for TLS"),
)
_SCHEMES = {"redis": ("redis://", "rediss://"), "search": ("http://", "https://")}


def _unreachable(section: str, url: str, detail: str, text: str) -> CdckitError:
    """A TLS mismatch read from the client's error `text` (SecurityMismatch naming the field), else unreachable."""
    plain, tls = _SCHEMES[section]
    for words, problem, field in _TLS_REFUSALS:
        if any(w in text for w in words):
            return SecurityMismatch(section, url, problem, field.format(s=section, plain=plain, tls=tls), detail)
    return EndpointUnreachable(section, url, detail)


def _chained(exc: BaseException) -> str:
    """The exception with its causes: client libraries wrap the TLS error that says what happened
    (elasticsearch-py's TlsError reads just "TLS error")."""
    parts, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        parts += [str(exc), *(str(e) for e in getattr(exc, "errors", ()) or ())]
        exc = exc.__cause__ or exc.__context__
    return " | ".join(parts)


def _short(text: str) -> str:
    return text.strip().splitlines()[0][:200] if text.strip() else ""
