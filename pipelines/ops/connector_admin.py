"""`cdckit connector apply|status|delete`: idempotent connector management over the REST API."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from connectors import postgres
from connectors.connect_client import ConnectClient, ConnectorStatus
from connectors.connect_secrets import is_reference, reference
from connectors.debezium_config import POSTGRES_CONNECTOR, SECRET_KEYS, ConnectorSettings, connector_config, diff
from pipelines.config import Config
from pipelines.errors import ConfigError
from pipelines.secrets import MASK, mask


@dataclass
class ApplyResult:
    action: str  # "created" | "updated" | "unchanged"
    changes: list[tuple[str, str | None, str | None]] = field(default_factory=list)


def connector_password(config: Config) -> str | None:
    """A reference Connect resolves (connectors/connect_secrets.py), unless `connect.secrets: inline`."""
    pg, connect = config.postgres, config.connect
    if pg.password is None:
        return None
    if connect.secrets == "inline":
        return pg.password.get()
    # A file as an absolute path: the worker (on this host, e.g. the local stack) resolves it from its
    # own working directory, the path is relative to cdckit's.
    file = None if pg.password.file is None else Path(pg.password.file).absolute()
    return connect.password_reference or reference(env=pg.password.env, file=file)


def connector_settings(config: Config) -> ConnectorSettings:
    """The connector's settings from cdckit's config."""
    pg = config.postgres
    return ConnectorSettings(
        config.topic_prefix, pg.connector_host or pg.host, pg.connector_port or pg.port, pg.user,
        connector_password(config), pg.database, pg.sslmode,
        str(pg.sslrootcert) if pg.sslrootcert else None, pg.slot, pg.publication, [t.name for t in config.tables],
        pg.signal_table, pg.heartbeat_table, pg.truncate_table, config.connect.heartbeat_interval_ms,
        config.kafka.replication_factor, config.kafka.partitions, dict(config.kafka.topic_config),
        config.connect.snapshot_fetch_size, config.connect.snapshot_max_threads,
        transaction_metadata=bool(config.documents))


def wanted_config(config: Config) -> dict[str, str]:
    """The connector config this cdckit config asks for."""
    return connector_config(connector_settings(config))


def masked(config: dict[str, str]) -> dict[str, str]:
    """A copy safe to print: secret-looking keys replaced (a provider reference is no secret),
    known secret values masked anywhere."""
    return {k: (MASK if any(s in k.lower() for s in SECRET_KEYS) and not is_reference(v) else mask(v))
            for k, v in config.items()}


def client_for(config: Config) -> ConnectClient:
    return ConnectClient(config.connect.url, timeout_s=config.connect.timeout_s)


def prepare_database(config: Config) -> None:
    """Tables the connector config refers to (heartbeat target, signal and truncate marker
    tables) must exist first; the user must hold what they and Debezium need."""
    from pipelines.ops import privileges
    from pipelines.ops.table_checks import check_database_tables

    pg = config.postgres
    with postgres.connect(pg.dsn_kwargs()) as conn:
        check_database_tables(config, conn)
        privileges.require(config, conn)
        postgres.ensure_support_tables(conn, pg.heartbeat_table, pg.signal_table, pg.truncate_table,
                                       [t.name for t in config.tables])


def apply(config: Config, client: ConnectClient | None = None) -> ApplyResult:
    client = client or client_for(config)
    wanted = wanted_config(config)
    current = client.get_config(config.connector_name)
    changes = diff(current, wanted)
    if not changes:
        return ApplyResult("unchanged")
    prepare_database(config)
    problems = client.validate(POSTGRES_CONNECTOR, {"name": config.connector_name, **wanted})
    if problems:
        raise ConfigError("connector", "Kafka Connect rejects the generated config: " + "; ".join(problems))
    client.put_config(config.connector_name, wanted)
    secret = masked(wanted)
    shown = [(k, None if old is None else masked({k: old})[k], None if new is None else secret[k])
             for k, old, new in changes]
    return ApplyResult("created" if current is None else "updated", shown)


def status(config: Config, client: ConnectClient | None = None) -> ConnectorStatus | None:
    from connectors.connect_client import ConnectNotFound

    client = client or client_for(config)
    try:
        return client.status(config.connector_name)
    except ConnectNotFound:
        return None
