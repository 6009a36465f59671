"""Before anything starts: every server the command needs answers, and accepts our credentials.

A wrong password or an unreachable host is refused here, naming the endpoint and the config fields
to fix, instead of surfacing minutes later as a failed Spark task.
"""
from __future__ import annotations

import logging

from pipelines.config import Config
from pipelines.errors import CredentialsRefused, EndpointUnreachable

log = logging.getLogger("cdckit.preflight")


def check(config: Config, kafka: bool = True, postgres: str = "no") -> None:
    """postgres: "no"; "required" (also checks the configured tables, see pipelines/ops/table_checks.py,
    and the user's privileges, pipelines/ops/privileges.py); "if_reachable" (the streaming job does
    not need the database: its tables are checked when it answers)."""
    if kafka:
        _kafka(config)
    if "search" in config.sinks:
        _search(config)
    if "cache" in config.sinks:
        _redis(config)
    if postgres != "no":
        from connectors.postgres import PostgresUnreachable
        from pipelines.ops import privileges
        from pipelines.ops.table_checks import check_database_tables

        try:
            check_database_tables(config)
            if postgres == "required":
                privileges.require(config)
        except PostgresUnreachable as exc:
            if postgres == "required":
                raise
            log.warning("tables not checked against the database (%s)", exc)


def _kafka(config: Config) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    conf = {**config.kafka.client_config(), "socket.connection.setup.timeout.ms": 5000, "log_level": 0}
    try:
        AdminClient(conf).list_topics(timeout=8)
    except KafkaException as exc:
        text = str(exc)
        if "SASL" in text or "uthentication" in text:
            raise CredentialsRefused("Kafka", config.kafka.bootstrap_servers,
                                     "kafka.sasl_username / kafka.sasl_password", _short(text)) from None
        raise EndpointUnreachable("Kafka", config.kafka.bootstrap_servers, _short(text)) from None


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
        raise EndpointUnreachable("search", config.search.url, _short(f"{type(exc).__name__}: {exc}"),
                                  *_tls_refusal(_chained(exc), "search")) from None


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
        raise EndpointUnreachable("redis", config.redis.url, _short(str(exc)), *_tls_refusal(str(exc), "redis")) \
            from None


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


def _tls_refusal(text: str, section: str) -> tuple[str, str | None]:
    plain, tls = _SCHEMES[section]
    for words, reason, field in _TLS_REFUSALS:
        if any(w in text for w in words):
            return reason, field.format(s=section, plain=plain, tls=tls)
    return "is unreachable", None


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
