"""Kafka Connect's class path and plugin folder, from the Maven-resolved jars (`jars.py`).

The worker's own jars go on the class path; Debezium's go in a plugin folder, so Connect loads
them in plugin isolation as it does in production.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from connectors.connect_secrets import worker_provider_properties
from pipelines.devstack.jars import component_dir

PLUGIN = "debezium-connector-postgres"


def assemble(connect_dir: Path) -> tuple[Path, Path]:
    """(class path folder, plugin path) for a worker whose home is connect_dir."""
    plugins = connect_dir / "plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    link, target = plugins / PLUGIN, component_dir("debezium")
    if link.is_symlink() or link.exists():
        if link.resolve() != target.resolve():
            link.unlink()
    if not link.exists():
        link.symlink_to(target, target_is_directory=True)
    return component_dir("connect"), plugins


CLIENT_PREFIXES = ("", "producer.", "consumer.", "admin.")


def worker_properties(bootstrap: str, port: int, plugins: Path, group: str = "cdckit-connect",
                      client: Mapping[str, Any] | None = None) -> str:
    """client: the Java client's security settings (KafkaConfig.java_client_config(): protocol,
    SASL, trust store), for the worker's own clients and, prefixed producer./consumer./admin., the
    ones it makes for connectors: a worker on a SASL_SSL listener needs them four times.
    `bootstrap` names the brokers (a bootstrap.servers in `client` is ignored)."""
    props = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false",
        "value.converter.schemas.enable": "false",
        "config.storage.topic": f"{group}-configs",
        "offset.storage.topic": f"{group}-offsets",
        "status.storage.topic": f"{group}-status",
        "config.storage.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "offset.storage.partitions": "1",
        "status.storage.partitions": "1",
        # How often Debezium confirms WAL positions to the slot: a read-your-writes wait (cdckit wait,
        # pipelines/client.py) lasts at least this long; one small offsets commit per interval.
        "offset.flush.interval.ms": "1000",
        "listeners": f"http://127.0.0.1:{port}",
        "rest.advertised.host.name": "127.0.0.1",
        "rest.advertised.port": str(port),
        "plugin.path": str(plugins),
        # Debezium's jars declare their plugins as services: no class-path scan at start.
        "plugin.discovery": "service_load",
        # Secrets in connector configs as references the worker resolves (connectors/connect_secrets.py).
        **worker_provider_properties(),
        # Lets the connector config tune its own producer (linger, batch size).
        "connector.client.config.override.policy": "All",
        # Faster group joins and rebalances after a test deletes a connector.
        "session.timeout.ms": "6000",
        "heartbeat.interval.ms": "1000",
        "scheduled.rebalance.max.delay.ms": "0",
        # No client telemetry pushes (the broker has no metrics plugin: each push logs a warning).
        **{f"{p}enable.metrics.push": "false" for p in CLIENT_PREFIXES},
    }
    for key, value in (client or {}).items():
        if key != "bootstrap.servers":
            props.update({f"{p}{key}": str(value) for p in CLIENT_PREFIXES})
    return properties_text(props)


def properties_text(props: Mapping[str, Any]) -> str:
    """A Java .properties file: a backslash in a value (a JAAS password may have one) is escaped,
    and a line break, so each setting stays one line."""
    def escaped(value: Any) -> str:
        return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")

    return "".join(f"{k}={escaped(v)}\n" for k, v in props.items())
