"""The Debezium Postgres connector config, generated from plain settings (pipelines/ops/connector_admin.py
takes them from cdckit's YAML config).

Every choice here is one the sync depends on; the comments say which part relies on it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

POSTGRES_CONNECTOR = "io.debezium.connector.postgresql.PostgresConnector"
_JSON = "org.apache.kafka.connect.json.JsonConverter"
MIN_COMPACTION_LAG_MS = 600_000
SECRET_KEYS = ("password", "sasl.jaas.config", "api.key", "secret")  # keys whose values are never shown


@dataclass(frozen=True)
class ConnectorSettings:
    """What the connector config is made of: the database, the tables, the topics."""

    topic_prefix: str
    hostname: str                        # as Kafka Connect reaches the database
    port: int
    user: str
    password: str | None
    database: str
    sslmode: str
    sslrootcert: str | None
    slot: str
    publication: str
    tables: list[str]                    # schema.table, the synced ones
    signal_table: str
    heartbeat_table: str
    truncate_table: str
    heartbeat_interval_ms: int
    replication_factor: int
    partitions: int
    topic_config: dict[str, Any]
    # Defaults live in cdckit's config (pipelines/config.py: ConnectConfig), the one place they are set.
    snapshot_fetch_size: int
    snapshot_max_threads: int
    transaction_metadata: bool = False   # nested documents configured: they fold whole transactions

    @property
    def notification_topic(self) -> str:
        """Debezium's notifications (connectors/kafka/notifications.py); one name part after the
        prefix, so outside the change topics' pattern (schema.table: two)."""
        return f"{self.topic_prefix}.notifications"

    @property
    def transaction_topic(self) -> str:
        """Debezium's transaction metadata (connectors/transactions.py); outside the change topics'
        pattern like the notifications."""
        return f"{self.topic_prefix}.transaction"


def heartbeat_query(table: str) -> str:
    # Writing to the database on every heartbeat lets the slot advance on an idle database
    # (otherwise WAL from other databases piles up behind it) and gives `verify` a position to wait for.
    return (f"INSERT INTO {table} (id, ts) VALUES (1, now()) "
            f"ON CONFLICT (id) DO UPDATE SET ts = EXCLUDED.ts")


def connector_config(s: ConnectorSettings) -> dict[str, str]:
    out: dict[str, str] = {
        "connector.class": POSTGRES_CONNECTOR,
        "tasks.max": "1",
        "plugin.name": "pgoutput",
        "database.hostname": s.hostname,
        "database.port": str(s.port),
        "database.user": s.user,
        "database.dbname": s.database,
        "database.sslmode": s.sslmode,
        **({"database.sslrootcert": s.sslrootcert} if s.sslrootcert else {}),
        "topic.prefix": s.topic_prefix,
        "slot.name": s.slot,
        "publication.name": s.publication,
        "publication.autocreate.mode": "filtered",
        # The signal table must be captured, or incremental snapshots cannot be signalled; so must
        # the heartbeat table: its writes are what lets an idle slot confirm WAL and move on.
        # The truncate marker table carries the tables' truncates (see connectors/postgres.py).
        "table.include.list": ",".join([*s.tables, s.signal_table, s.heartbeat_table, s.truncate_table]),
        "signal.data.collection": s.signal_table,
        "signal.enabled.channels": "source",
        # An incremental snapshot's end, exactly: a COMPLETED notification keyed by its signal's id
        # (the schema watch and `snapshot add` waited for 10 s without a new snapshot window).
        "notification.enabled.channels": "sink",
        "notification.sink.topic.name": s.notification_topic,
        "snapshot.mode": "initial",
        "snapshot.fetch.size": str(s.snapshot_fetch_size),
        "snapshot.max.threads": str(s.snapshot_max_threads),
        # Deletes must reach the stores and compaction must be able to drop the key afterwards.
        "tombstones.on.delete": "true",
        # Debezium's own truncate event has no key: a compacted topic refuses it and the task fails.
        # Truncates reach the stores as keyed marker rows instead.
        "skipped.operations": "t",
        "topic.creation.enable": "true",
        "topic.creation.default.replication.factor": str(s.replication_factor),
        "topic.creation.default.partitions": str(s.partitions),
        "topic.creation.default.cleanup.policy": "compact",
        # A record stays uncompacted for 10 minutes: a job less than that behind the log reads every
        # change, so the nested documents fold whole transactions (a transaction part of which was
        # compacted away before it was read cannot be shown whole: pipelines/apply/transaction_gate.py).
        # `kafka.topic_config` overrides it.
        "topic.creation.default.min.compaction.lag.ms": str(MIN_COMPACTION_LAG_MS),
        **{f"topic.creation.default.{k}": str(v) for k, v in s.topic_config.items()},
        "heartbeat.interval.ms": str(s.heartbeat_interval_ms),
        "heartbeat.action.query": heartbeat_query(s.heartbeat_table),
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
    if s.transaction_metadata:
        # Each streamed change names its transaction, and an END record per transaction counts its
        # changes per table: the nested documents fold whole transactions only (issue #38.9). Its
        # topic has one partition (the ENDs in commit order) and is trimmed by time: every key is new.
        # Only with documents: three records instead of one per one-row transaction otherwise.
        out.update({
            "provide.transaction.metadata": "true",
            "topic.transaction": "transaction",
            "topic.creation.groups": "transactions",
            "topic.creation.transactions.include": re.escape(s.transaction_topic),
            "topic.creation.transactions.partitions": "1",
            "topic.creation.transactions.replication.factor": str(s.replication_factor),
            "topic.creation.transactions.cleanup.policy": "delete",
            "topic.creation.transactions.retention.ms": str(7 * 24 * 3600 * 1000),
        })
    if s.password is not None:
        out["database.password"] = s.password
    return out


def diff(current: dict[str, str] | None, wanted: dict[str, str]) -> list[tuple[str, str | None, str | None]]:
    """(key, old, new) for every key that differs; Connect adds 'name' to stored configs, ignore it."""
    current = {k: v for k, v in (current or {}).items() if k != "name"}
    keys = sorted(set(current) | set(wanted))
    return [(k, current.get(k), wanted.get(k)) for k in keys if current.get(k) != wanted.get(k)]
