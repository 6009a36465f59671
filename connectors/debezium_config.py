"""The Debezium Postgres connector config, generated from cdckit's YAML config.

Every choice here is one the sync depends on; the comments say which part relies on it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipelines.config import Config

POSTGRES_CONNECTOR = "io.debezium.connector.postgresql.PostgresConnector"
_JSON = "org.apache.kafka.connect.json.JsonConverter"
_SECRET_KEYS = ("password", "sasl.jaas.config", "api.key", "secret")


def heartbeat_query(table: str) -> str:
    # Writing to the database on every heartbeat lets the slot advance on an idle database
    # (otherwise WAL from other databases piles up behind it) and gives `verify` a position to wait for.
    return (f"INSERT INTO {table} (id, ts) VALUES (1, now()) "
            f"ON CONFLICT (id) DO UPDATE SET ts = EXCLUDED.ts")


def connector_config(config: "Config") -> dict[str, str]:
    pg = config.postgres
    out: dict[str, str] = {
        "connector.class": POSTGRES_CONNECTOR,
        "tasks.max": "1",
        "plugin.name": "pgoutput",
        "database.hostname": pg.connector_host or pg.host,
        "database.port": str(pg.connector_port or pg.port),
        "database.user": pg.user,
        "database.dbname": pg.database,
        "database.sslmode": pg.sslmode,
        **({"database.sslrootcert": str(pg.sslrootcert)} if pg.sslrootcert else {}),
        "topic.prefix": config.topic_prefix,
        "slot.name": pg.slot,
        "publication.name": pg.publication,
        "publication.autocreate.mode": "filtered",
        # The signal table must be captured, or incremental snapshots cannot be signalled; so must
        # the heartbeat table: its writes are what lets an idle slot confirm WAL and move on.
        # The truncate marker table carries the tables' truncates (see connectors/postgres.py).
        "table.include.list": ",".join([t.name for t in config.tables]
                                       + [pg.signal_table, pg.heartbeat_table, pg.truncate_table]),
        "signal.data.collection": pg.signal_table,
        "signal.enabled.channels": "source",
        "snapshot.mode": "initial",
        # Deletes must reach the stores and compaction must be able to drop the key afterwards.
        "tombstones.on.delete": "true",
        # Debezium's own truncate event has no key: a compacted topic refuses it and the task fails.
        # Truncates reach the stores as keyed marker rows instead.
        "skipped.operations": "t",
        "topic.creation.enable": "true",
        "topic.creation.default.replication.factor": str(config.kafka.replication_factor),
        "topic.creation.default.partitions": str(config.kafka.partitions),
        "topic.creation.default.cleanup.policy": "compact",
        **{f"topic.creation.default.{k}": str(v) for k, v in config.kafka.topic_config.items()},
        "heartbeat.interval.ms": str(config.connect.heartbeat_interval_ms),
        "heartbeat.action.query": heartbeat_query(pg.heartbeat_table),
        "key.converter": _JSON,
        "key.converter.schemas.enable": "false",
        "value.converter": _JSON,
        "value.converter.schemas.enable": "false",
        # Exact values in the stores: numerics as strings (no float rounding), intervals as ISO strings.
        "decimal.handling.mode": "string",
        "interval.handling.mode": "string",
        "hstore.handling.mode": "json",
        # An unchanged TOAST column is not in the WAL: Debezium sends a placeholder. Re-read it from
        # the table (by the event's key) so events carry the value: after a primary-key change the new
        # key has nothing stored to merge from, and a rebuild needs no older record of the key. The
        # value read is the row's current one, never older than the event's, so a later event of the
        # row still ends last. A row deleted since keeps its placeholder (the stores keep what they
        # hold). NULLs are data: never re-read.
        "post.processors": "reselector",
        "reselector.type": "io.debezium.processors.reselect.ReselectColumnsPostProcessor",
        "reselector.reselect.unavailable.values": "true",
        "reselector.reselect.null.values": "false",
        # Throughput: measured to double the event rate into Kafka on a 2-core machine.
        "max.batch.size": "8192",
        "max.queue.size": "65536",
        "poll.interval.ms": "100",
        "producer.override.linger.ms": "20",
        "producer.override.batch.size": "1048576",
    }
    if pg.password is not None:
        out["database.password"] = pg.password.get()
    return out


def masked(config: dict[str, str]) -> dict[str, str]:
    """A copy safe to print: secret-looking keys replaced, known secret values masked anywhere."""
    from pipelines.secrets import MASK, mask

    return {k: (MASK if any(s in k.lower() for s in _SECRET_KEYS) else mask(v)) for k, v in config.items()}


def diff(current: dict[str, str] | None, wanted: dict[str, str]) -> list[tuple[str, str | None, str | None]]:
    """(key, old, new) for every key that differs; Connect adds 'name' to stored configs, ignore it."""
    current = {k: v for k, v in (current or {}).items() if k != "name"}
    keys = sorted(set(current) | set(wanted))
    return [(k, current.get(k), wanted.get(k)) for k in keys if current.get(k) != wanted.get(k)]
