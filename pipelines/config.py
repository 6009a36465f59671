"""The one YAML config, validated up front: a mistake names its field and nothing starts."""
from __future__ import annotations

import json
import re
import string
from pathlib import Path
from typing import Any, Iterator, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from derived.sinks.cache.keys import adjacent_placeholders
from pipelines.document_config import DocumentConfig, IndexName, QualifiedTable
from pipelines.errors import ConfigError
from pipelines.secrets import SecretRef

_IDENT = r"[A-Za-z_][A-Za-z0-9_$]*"
_TABLE = re.compile(rf"^{_IDENT}\.{_IDENT}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PostgresConfig(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(5432, ge=1, le=65535)
    database: str
    user: str
    password: SecretRef | None = None
    sslmode: Literal["disable", "allow", "prefer", "require", "verify-ca", "verify-full"] = "prefer"
    sslrootcert: Path | None = Field(None, description="CA bundle for verify-ca / verify-full")
    slot: str = Field("cdckit", pattern=r"^[a-z0-9_]{1,63}$")
    publication: str = Field("cdckit", pattern=r"^[A-Za-z0-9_]{1,63}$")
    heartbeat_table: str = Field("public.cdckit_heartbeat", pattern=_TABLE.pattern)
    signal_table: str = Field("public.cdckit_signal", pattern=_TABLE.pattern)
    truncate_table: str = Field("public.cdckit_truncates", pattern=_TABLE.pattern,
                                description="marker rows written by a TRUNCATE trigger on each synced table")
    connector_host: str | None = Field(None, description="host Kafka Connect uses, when it differs from 'host'")
    connector_port: int | None = Field(None, ge=1, le=65535)
    # A read-only role for what only reads (verify, status): connectors/sql/roles.sql creates one.
    reader_user: str | None = Field(None, description="read-only role for `cdckit verify` and `status`; "
                                                      "default: postgres.user")
    reader_password: SecretRef | None = None

    @model_validator(mode="after")
    def _reader_password_needs_a_reader(self) -> "PostgresConfig":
        if self.reader_password is not None and self.reader_user is None:
            raise ValueError("reader_password is given without reader_user")
        return self

    def dsn_kwargs(self) -> dict[str, Any]:
        """As `user`: the replication role bootstrap, run, snapshot and the connector use."""
        return self._dsn(self.user, self.password)

    def reader_dsn_kwargs(self) -> dict[str, Any]:
        """As `reader_user` when one is configured: what verify and status use (they only read)."""
        if self.reader_user is None:
            return self.dsn_kwargs()
        return self._dsn(self.reader_user, self.reader_password)

    def _dsn(self, user: str, password: SecretRef | None) -> dict[str, Any]:
        kw: dict[str, Any] = dict(host=self.host, port=self.port, dbname=self.database, user=user,
                                  sslmode=self.sslmode, connect_timeout=5)
        if password:
            kw["password"] = password.get()
        if self.sslrootcert:
            kw["sslrootcert"] = str(self.sslrootcert)
        return kw


class KafkaConfig(_Strict):
    bootstrap_servers: str
    partitions: int = Field(1, ge=1, description="partitions of each change topic Debezium creates")
    replication_factor: int = Field(1, ge=1)
    topic_config: dict[str, str | int | float] = Field(
        default_factory=dict, description="extra settings of the change topics Debezium creates "
        "(e.g. segment.ms, min.cleanable.dirty.ratio, delete.retention.ms); cleanup.policy stays compact")
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    sasl_username: str | None = None
    sasl_password: SecretRef | None = None
    ssl_ca_location: Path | None = None

    @field_validator("topic_config")
    @classmethod
    def _compacted(cls, v: dict[str, Any]) -> dict[str, Any]:
        if "cleanup.policy" in v:
            raise ValueError("cleanup.policy cannot be set: change topics must be compacted (the rebuild "
                             "replays them and needs the last record of every key)")
        bad = [k for k in v if not re.fullmatch(r"[a-z0-9]+(\.[a-z0-9]+)*", k)]
        if bad:
            raise ValueError(f"not a topic setting name: {', '.join(bad)}")
        return v

    @model_validator(mode="after")
    def _sasl_complete(self) -> "KafkaConfig":
        if self.security_protocol.startswith("SASL") and not (
            self.sasl_mechanism and self.sasl_username and self.sasl_password
        ):
            raise ValueError("SASL needs sasl_mechanism, sasl_username and sasl_password")
        return self

    def client_config(self) -> dict[str, Any]:
        """librdkafka settings shared by every producer, consumer and admin client."""
        # log_level 3: librdkafka's errors only (its notices, e.g. on closing a producer, are noise).
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers,
                                "security.protocol": self.security_protocol, "log_level": 3}
        if self.sasl_mechanism:
            conf.update({"sasl.mechanism": self.sasl_mechanism, "sasl.username": self.sasl_username,
                         "sasl.password": self.sasl_password.get()})
        if self.ssl_ca_location:
            conf["ssl.ca.location"] = str(self.ssl_ca_location)
        return conf

    def java_client_config(self) -> dict[str, Any]:
        """The same for Java clients (Spark's built-in kafka source): JAAS and a PEM trust store."""
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers,
                                "security.protocol": self.security_protocol}
        if self.sasl_mechanism:
            module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if self.sasl_mechanism == "PLAIN"
                      else "org.apache.kafka.common.security.scram.ScramLoginModule")
            user, password = (json.dumps(v) for v in (self.sasl_username, self.sasl_password.get()))
            conf.update({"sasl.mechanism": self.sasl_mechanism,
                         "sasl.jaas.config": f"{module} required username={user} password={password};"})
        if self.ssl_ca_location:
            conf.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ssl_ca_location)})
        return conf


class ConnectConfig(_Strict):
    url: str
    connector_name: str | None = None
    timeout_s: float = Field(10.0, gt=0)
    heartbeat_interval_ms: int = Field(10_000, ge=0)
    # Debezium's initial snapshot (benchmarks/bootstrap_1m.py measured them): rows per fetch of the
    # snapshot's SELECT, and tables snapshotted at once (each thread one table and one connection).
    snapshot_fetch_size: int = Field(10_240, ge=1)
    snapshot_max_threads: int = Field(2, ge=1)
    # How the connector gets the database password: a reference the Connect worker resolves with
    # its config providers (the value is then never at rest in Connect), or the value itself.
    secrets: Literal["reference", "inline"] = "reference"
    password_reference: str | None = Field(
        None, description="the password as the worker resolves it, e.g. '${dir:/run/secrets:pg_password}'; "
                          "default: from postgres.password ({env: X} -> ${env:X}, {file: P} -> ${dir:DIR:FILE})")

    @field_validator("password_reference")
    @classmethod
    def _a_reference(cls, v: str | None) -> str | None:
        from connectors.connect_secrets import is_reference

        if v is not None and not is_reference(v):
            raise ValueError("must be a config provider reference like '${env:NAME}' or '${dir:/path:file}'")
        return v

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        return _check_url(v, ("http", "https"))


def _no_gc_deletes(settings: dict[str, Any]) -> dict[str, Any]:
    from derived.sinks.search.definition import flat_settings

    if "index.gc_deletes" in flat_settings(settings):
        raise ValueError("index.gc_deletes comes from search.deleted_version_ttl_s (every index cdckit creates "
                         "has it); set that instead")
    return settings


class TableSearchConfig(_Strict):
    """How the table's index is defined (derived/sinks/search/definition.py): mappings derived from
    the column types, these options and overrides; a change is applied by a rebuild."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    settings: dict[str, Any] = Field(default_factory=dict, description="index settings (number_of_shards, "
                                     "number_of_replicas, refresh_interval, analysis, ...), over search.index_settings")
    mappings: dict[str, dict[str, Any]] = Field(default_factory=dict, description="document field -> mapping, "
                                                "replacing the one derived from the column type")
    dynamic: Literal[True, False, "strict"] = Field(True, description="fields no mapping names: true (mapped from their "
                                              "first value), false (kept in _source, not indexed), strict (refused)")
    text: Literal["text+keyword", "text", "keyword"] = Field(
        "text+keyword", description="text columns: text with a .keyword subfield, text, or keyword")
    json_mode: Literal["object", "flattened"] = Field(
        "flattened", alias="json", description="json/jsonb/hstore columns: flattened (one field for the whole "
        "value, every leaf a keyword under its path; flat_object on OpenSearch; never refuses a value) or "
        "object (each key a typed field; a path whose type changes, a scalar value, an empty key, deep or "
        "wide JSON is refused)")

    @field_validator("settings")
    @classmethod
    def _settings(cls, v: dict[str, Any]) -> dict[str, Any]:
        return _no_gc_deletes(v)


def _per_store(v):
    """A setting given per store is keyed by the stores' names."""
    if isinstance(v, dict) and not set(v) <= {"search", "cache"}:
        raise ValueError(f"keys are the stores, search and cache; not {sorted(set(v) - {'search', 'cache'})}")
    return v


class SoftDelete(_Strict):
    """A row marked deleted is removed from the stores, and comes back when unmarked (issue #39)."""
    column: str = Field(description="the marking column: a boolean (true: deleted), or any column whose value "
                                    "marks the row (not null: deleted, e.g. deleted_at)")
    value: str | int | float | bool | None = Field(
        None, description="the value that marks a row deleted (e.g. 'deleted' of a status column); default: "
                          "true for a boolean column, any non-null value otherwise")


class TableTransform(_Strict):
    """What documents hold besides the row's own columns, and what a store leaves out (issue #39)."""
    fields: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="computed fields: name -> one of concat, lower, upper, map, date_part, "
        "constant (docs/shaping.md: Transforms), e.g. {full_name: {concat: [first, {text: ' '}, last]}}")
    remove: list[str] | dict[str, list[str]] = Field(
        default_factory=list, description="document fields left out: a list for both stores, or "
                                          "{search: [...], cache: [...]}")
    hook: str | None = Field(None, pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$",
                             description="module:function(row) -> row, for what the fields cannot say: given the "
                                         "typed row, run where changes are applied; its exceptions are dead letters")

    @field_validator("fields")
    @classmethod
    def _fields_well_formed(cls, v):
        from derived.transforms import TransformError, check

        for name, spec in v.items():
            try:
                check(spec)
            except TransformError as exc:
                raise ValueError(f"{name}: {exc}") from None
        return v

    @field_validator("remove")
    @classmethod
    def _stores(cls, v):
        return _per_store(v)

    def removed(self, store: str) -> tuple[str, ...]:
        return tuple(self.remove.get(store, []) if isinstance(self.remove, dict) else self.remove)


class RedisLookup(_Strict):
    """A set (or a sorted set, given `score`) per value of some columns, holding the rows' members:
    kept exact as rows move between keys, are deleted, truncated or filtered out (issue #39)."""
    key: str = Field(description="key template over the row's columns, e.g. 'orders_by_customer:{customer_id}'")
    member: str = Field("{_id}", description="member template; default: the row's id")
    score: str | None = Field(None, description="a column (number, date, timestamp, time, boolean): a sorted set "
                                                "scored by it (dates as seconds since 1970); none: a set")

    @field_validator("key", "member")
    @classmethod
    def _template(cls, v: str, info) -> str:
        try:
            parts = list(string.Formatter().parse(v))
        except ValueError as exc:
            raise ValueError(f"{v!r}: {exc}") from None
        fields = [f for _, f, _, _ in parts if f is not None]
        if not fields:
            raise ValueError(f"{v!r} needs at least one {{placeholder}}")
        if any(not f for f in fields):
            raise ValueError(f"{v!r}: a placeholder needs a column name")
        if any(spec or conversion for _, f, spec, conversion in parts if f is not None):
            raise ValueError(f"{v!r}: placeholders are plain column names (no format spec or conversion): a value "
                             "is written as the stores hold it")
        if adjacent_placeholders(v):
            raise ValueError(f"{v!r}: placeholders need text between them (e.g. '{{a}}:{{b}}')")
        if info.field_name == "key" and (not parts[0][0] or v.startswith("cdckit:")):
            raise ValueError(f"{v!r}: a lookup key starts with a prefix of its own (not 'cdckit:'), e.g. "
                             "'orders_by_customer:{customer_id}'")
        return v

    @property
    def spec(self):
        """The lookup as the cache sink keeps it (derived/sinks/cache/lookups.py)."""
        from derived.sinks.cache.lookups import Lookup

        return Lookup(self.key, self.member, self.score)

    def identifies_row(self, key_columns: list[str]) -> bool:
        from derived.sinks.cache.keys import placeholders

        named = set(placeholders(self.member))
        return "_id" in named or set(key_columns) <= named

    @property
    def columns(self) -> list[str]:
        return sorted(self.spec.columns)


class TableConfig(_Strict):
    name: QualifiedTable = Field(description="schema.table")
    key: list[str] | None = Field(None, min_length=1, description="key columns; default: the primary key")
    index: IndexName = Field(None, description="search index (alias) name; default: schema_table")
    redis_key: str | None = Field(None, description="key template, e.g. 'customer:{id}'; default: schema.table:{_id}")
    redis_format: Literal["json", "hash"] = "json"
    redis_ttl_s: int | None = Field(None, gt=0)
    columns: list[str] | None = Field(None, min_length=1, description="projection: the columns kept")
    rename: dict[str, str] = Field(default_factory=dict, description="column -> document field")
    mappings: dict[str, Any] | None = Field(None, description="the older spelling of search.mappings")
    numeric_as_number: list[str] = Field(
        default_factory=list, description="numeric/money columns rendered as JSON numbers in both stores (a "
        "double: beyond 15-17 significant digits the value rounds); every other numeric stays an exact string")
    on_schema_change: Literal["evolve", "rebuild", "stop"] = Field(
        "evolve", description="a column added, dropped, renamed or retyped: evolve (extend the index mapping; "
                              "re-read every row when rows changed without events; rebuild search after a type "
                              "change), rebuild (re-read and rebuild both stores), stop (stop the job, naming it)")
    search: TableSearchConfig = Field(default_factory=TableSearchConfig,
                                      description="the table's index definition: settings, mappings, options")
    where: str | dict[str, str] | None = Field(
        None, description="row filter: the rows the stores hold, a predicate over the row's columns (docs/"
                          "shaping.md: Row filters), e.g. \"status in ('paid', 'shipped') and total > 0\"; a mapping "
                          "{search: ..., cache: ...} filters each store on its own (a store left out holds every row)")
    soft_delete: SoftDelete | None = Field(None, description="rows marked deleted leave both stores")
    transform: TableTransform = Field(default_factory=TableTransform,
                                      description="computed fields, fields a store leaves out, a Python hook")
    lookups: list[RedisLookup] = Field(
        default_factory=list, description="Redis sets or sorted sets keyed by the row's columns (docs/shaping.md: "
                                          "Redis lookups), e.g. [{key: 'orders_by_customer:{customer_id}'}]")
    documents_only: bool = Field(False, description="captured for the documents that read it, with no index and "
                                 "no keys of its own (a table only documents name is added so by itself)")

    @field_validator("where")
    @classmethod
    def _where_parses(cls, v):
        from connectors.row_filter import FilterError, parse_filter

        _per_store(v)
        for store, text in (v.items() if isinstance(v, dict) else [(None, v)] if v is not None else []):
            try:
                parse_filter(text)
            except FilterError as exc:
                raise ValueError(f"{store + ': ' if store else ''}{exc}") from None
        return v

    @field_validator("search")
    @classmethod
    def _one_mappings(cls, v: TableSearchConfig, info) -> TableSearchConfig:
        if v.mappings and info.data.get("mappings"):
            raise ValueError("mappings given here and in the table's 'mappings' (its older spelling): keep one")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "TableConfig":
        if self.columns is not None:
            unknown = set(self.rename) - set(self.columns)
            if unknown:
                raise ValueError(f"rename names columns outside 'columns': {sorted(unknown)}")
            outside = set(self.numeric_as_number) - set(self.columns)
            if outside:
                raise ValueError(f"numeric_as_number names columns outside 'columns': {sorted(outside)}")
        if self.redis_key is not None:
            fields = {f for _, f, _, _ in string.Formatter().parse(self.redis_key) if f is not None}
            if not fields:
                raise ValueError("redis_key needs at least one {placeholder}")
            if adjacent_placeholders(self.redis_key):
                raise ValueError("redis_key placeholders need text between them (e.g. '{a}:{b}'): "
                                 "without it two rows can share a key")
            allowed = set(self.key or []) | {"_id"}
            if self.key is not None and not fields <= allowed:
                raise ValueError(f"redis_key placeholders {sorted(fields - allowed)} are not key columns")
        if self.documents_only:
            own = [f for f in ("index", "redis_key", "redis_ttl_s", "where", "soft_delete") if getattr(self, f)]
            own += ["lookups"] if self.lookups else []
            if own:
                raise ValueError(f"documents_only: the table has no index or keys of its own, so {own} mean nothing")
        if self.lookups and self.redis_ttl_s:
            raise ValueError("lookups and redis_ttl_s: a row's key would expire and leave its lookup entries "
                             "behind; drop one")
        keys = [lk.key for lk in self.lookups]
        if len(set(keys)) != len(keys):
            raise ValueError("two lookups with the same key template")
        for lk in self.lookups:
            if self.key is not None and not lk.identifies_row(self.key):
                raise ValueError(f"lookup {lk.key!r}: its member {lk.member!r} must name the row ({{_id}}, or every key "
                                 f"column: {self.key}): two rows with one member would take each other's entry away")
        return self

    @property
    def schema_name(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def table_name(self) -> str:
        return self.name.split(".", 1)[1]

    @property
    def index_name(self) -> str:
        return self.index or f"{self.schema_name}_{self.table_name}".lower()

    @property
    def search_mappings(self) -> dict[str, Any]:
        """search.mappings, or the older tables.N.mappings."""
        return self.search.mappings or self.mappings or {}

    @property
    def redis_key_template(self) -> str:
        return self.redis_key or f"{self.name}:{{_id}}"

    def row_filter(self, store: str) -> tuple[str | None, tuple[str, Any] | None]:
        """(where, soft delete as (column, value)) for one store: "search" or "cache"."""
        where = self.where.get(store) if isinstance(self.where, dict) else self.where
        soft = (self.soft_delete.column, self.soft_delete.value) if self.soft_delete else None
        return where, soft

    @property
    def filtered(self) -> bool:
        return self.where is not None or self.soft_delete is not None

    @property
    def whole_rows(self) -> bool:
        """Its upserts need every column where they are applied (a filter judges the row, a computed
        field or the hook reads it): unchanged TOAST columns are read from Postgres."""
        return self.filtered or bool(self.transform.hook) or any(
            self._reads(spec) for spec in self.transform.fields.values())

    @staticmethod
    def _reads(spec) -> bool:
        from derived.transforms import columns_read

        return bool(columns_read(spec))


class SearchConfig(_Strict):
    kind: Literal["elasticsearch", "opensearch"]
    url: str
    username: str | None = None
    password: SecretRef | None = None
    api_key: SecretRef | None = None
    verify_certs: bool = True
    ca_certs: Path | None = None
    bulk_chunk: int = Field(5000, ge=1, description="writes per bulk request (and at most ~10 MB): "
                            "benchmarks/bootstrap_1m.py's raw sweep found 5,000 the fastest")
    max_document_bytes: int = Field(10 * 1024 * 1024, ge=1024,
                                    description="larger documents go to the dead-letter topic")
    timeout_s: float = Field(30.0, gt=0, description="how long one request to the engine may take (a bulk of "
                             "bulk_chunk writes too) before it fails; the batch then fails and is retried")
    deleted_version_ttl_s: int = Field(
        86_400, ge=60, description="index.gc_deletes of the indices cdckit creates: how long the engine "
        "remembers a deleted document's version, so an older replay (dlq replay, a rebuild's catch-up "
        "beside the live writes) cannot bring it back (the engine's default is 60 s); size it above the longest "
        "a replay can lag: see docs/documents.md, Index definitions")
    index_settings: dict[str, Any] = Field(
        default_factory=dict, description="index settings every table's index starts from (tables.N.search.settings "
        "go over them), e.g. {number_of_replicas: 0} on a one-node cluster")

    @field_validator("index_settings")
    @classmethod
    def _settings(cls, v: dict[str, Any]) -> dict[str, Any]:
        return _no_gc_deletes(v)

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        return _check_url(v, ("http", "https"))

    @model_validator(mode="after")
    def _auth(self) -> "SearchConfig":
        if self.api_key and (self.username or self.password):
            raise ValueError("use either api_key or username/password, not both")
        if bool(self.username) != bool(self.password):
            raise ValueError("username and password go together")
        return self


class RedisConfig(_Strict):
    url: str
    username: str | None = None
    password: SecretRef | None = None
    deleted_version_ttl_s: int = Field(7 * 24 * 3600, gt=0,
                                       description="how long the version of a deleted key is kept")
    ca_certs: Path | None = Field(None, description="CA bundle for a rediss:// URL")
    timeout_s: float = Field(10.0, gt=0, description="how long one Redis command (a pipeline of a batch's "
                             "writes too) may take before it fails; the batch then fails and is retried")
    rebuild_db: int | None = Field(None, ge=0, description="spare database a cache rebuild fills, then "
                                                          "SWAPDBs with the live one; default: live + 1")

    @property
    def db(self) -> int:
        path = urlsplit(self.url).path.strip("/")
        return int(path) if path.isdigit() else 0

    @property
    def spare_db(self) -> int:
        return self.rebuild_db if self.rebuild_db is not None else self.db + 1

    def url_for(self, db: int) -> str:
        parts = urlsplit(self.url)
        return parts._replace(path=f"/{db}").geturl()

    @model_validator(mode="after")
    def _spare_differs(self) -> "RedisConfig":
        if self.rebuild_db is not None and self.rebuild_db == self.db:
            raise ValueError("rebuild_db must differ from the database in the url")
        return self

    @field_validator("url")
    @classmethod
    def _redis_url(cls, v: str) -> str:
        path = urlsplit(v).path.strip("/")
        if path and not path.isdigit():
            raise ValueError(f"the path of '{v}' must be a database number")
        return _check_url(v, ("redis", "rediss"))


# Spark settings `spark.conf` may not carry: cdckit decides them (the checkpoint check and the code
# shipping follow spark.master).
_SPARK_OWN = {"spark.master", "spark.submit.deployMode", "spark.app.name"}


class SparkConfig(_Strict):
    master: str = "local[2]"
    checkpoint_dir: Path = Path(".cdckit/checkpoints")
    # 500 ms: the interval the freshness benchmark (benchmarks/freshness.py) measures its figures at.
    trigger: str = Field("500 ms", validate_default=True, description="a processing-time interval, or 'available_now'")
    # Measured by benchmarks/cpu_per_change.py: a batch's fixed cost paid half as often at 2,000/s
    # (pipelines/streaming/batch_cadence.py says how).
    trigger_under_load: str | None = Field("1 s", validate_default=True, description=(
        "the interval the tables' batches start at under load (at least load_rate records per second): "
        "fewer, larger batches, a change visible up to the difference from the trigger later; "
        "null, or not above trigger: always the trigger's"))
    load_rate: int = Field(1000, gt=0, description=(
        "Kafka records per second (a delete is two: its tombstone) from which trigger_under_load applies; "
        "it holds until the rate falls below 80 % of this"))
    max_offsets_per_trigger: int | None = Field(None, gt=0)
    kafka_source: Literal["python", "jvm"] = Field(
        "python", description="'jvm' uses Spark's built-in kafka source when its jar is on the class path")
    shuffle_partitions: int = Field(4, ge=1, description="Spark SQL shuffle partitions; with nested "
                                    "documents, one per document (their state's partitions)")
    conf: dict[str, str | int | float | bool] = Field(default_factory=dict, description=(
        "more Spark settings, as spark-submit's --conf takes them (executor memory and cores, "
        "spark.pyspark.python: the Python the executors run, ...); set after cdckit's own"))
    checkpoint_shared: bool | None = Field(None, description=(
        "on a cluster, checkpoint_dir must be a file system every host mounts (NFS, EFS, CephFS, ...); "
        "None: told from the mount's type, true: trust that it is (a shared mount cdckit does not know)"))

    @field_validator("checkpoint_dir", mode="before")
    @classmethod
    def _checkpoint_path(cls, v):
        if isinstance(v, str) and "://" in v:
            raise ValueError("a path, not a URI: cdckit keeps its own state files beside Spark's checkpoint "
                             "with file operations, so a shared store must be mounted (NFS, EFS, CephFS, "
                             "an S3 file system mount) and given by its path")
        return v

    @field_validator("conf")
    @classmethod
    def _conf(cls, v: dict) -> dict[str, str]:
        wrong = [k for k in v if not k.startswith("spark.")]
        if wrong:
            raise ValueError(f"Spark settings start with 'spark.': {', '.join(sorted(wrong))}")
        own = [k for k in v if k in _SPARK_OWN]
        if own:
            raise ValueError(f"{', '.join(sorted(own))}: set by cdckit from its own fields "
                             "(spark.master; spark-submit's --master and --deploy-mode when submitted)")
        return {k: str(x).lower() if isinstance(x, bool) else str(x) for k, x in v.items()}

    @field_validator("trigger")
    @classmethod
    def _trigger(cls, v: str) -> str:
        if v == "available_now":
            return v
        if re.sub(r"[\s_-]", "", v.lower()) == "realtime":
            # Measured, not assumed: benchmarks/README.md, Real-Time Mode.
            raise ValueError("Spark's Real-Time Mode cannot carry cdckit's apply: Spark 4.3 hands rows to a "
                             "Python writer in batches that wait to fill (seconds, and the last rows until more "
                             "come) and refuses Python UDFs in the mode; use an interval (the default 500 ms "
                             "keeps a change visible in under a second at p99 at 500 changes/s)")
        return _interval(v, "or 'available_now'")

    @field_validator("trigger_under_load")
    @classmethod
    def _trigger_under_load(cls, v: str | None) -> str | None:
        return None if v is None else _interval(v, "or null (always the trigger's)")

    @staticmethod
    def seconds(interval: str | None) -> float:
        """An interval as this config spells it ('500 milliseconds'), in seconds; 0 for None."""
        if interval is None or interval == "available_now":
            return 0.0
        number, unit = interval.split()
        return int(number) * {"milliseconds": 0.001, "seconds": 1.0, "minutes": 60.0}[unit]


def _interval(v: str, other: str) -> str:
    m = re.match(r"^(\d+)\s*(ms|milliseconds?|s|seconds?|minutes?)$", v.strip())
    if not m:
        raise ValueError(f"use an interval like '1 second' / '500 ms', {other}")
    # Spark's interval parser wants spelled-out units.
    unit = {"ms": "milliseconds", "s": "seconds"}.get(m[2], m[2].rstrip("s") + "s")
    return f"{m[1]} {unit}"


class DeadLetterConfig(_Strict):
    include_values: bool = Field(True, description="false: a dead letter keeps the record's key, source "
                                 "position and reason but not its value (the row image); `dlq replay` "
                                 "reads each key's newest record from the change topic either way")


class Config(_Strict):
    topic_prefix: str = Field("cdc", pattern=r"^[A-Za-z0-9_\-]+$")
    postgres: PostgresConfig
    kafka: KafkaConfig
    connect: ConnectConfig
    tables: list[TableConfig] = Field(min_length=1)
    documents: list[DocumentConfig] = Field(default_factory=list, description=(
        "nested documents: one per root row, built from related tables (each also listed in 'tables')"))
    search: SearchConfig
    redis: RedisConfig
    spark: SparkConfig = Field(default_factory=SparkConfig)
    dlq_topic: str | None = None
    dlq: DeadLetterConfig = Field(default_factory=DeadLetterConfig)
    metrics_port: int = Field(9464, ge=0, le=65535, description="Prometheus metrics of `cdckit run`; 0 = off")
    metrics_host: str = Field("127.0.0.1", description="address the metrics listen on (0.0.0.0 in a container)")
    sinks: list[Literal["search", "cache"]] = Field(default_factory=lambda: ["search", "cache"], min_length=1,
                                                    description="which derived stores this pipeline writes")

    @model_validator(mode="after")
    def _unique_tables(self) -> "Config":
        names = [t.name for t in self.tables]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"tables listed twice: {dupes}")
        indexes = [t.index_name for t in self.tables if not t.documents_only]
        if len(set(indexes)) != len(indexes):
            raise ValueError("two tables map to the same index")
        return self

    @model_validator(mode="after")
    def _documents(self) -> "Config":
        names = [d.name for d in self.documents]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"documents named twice: {twice}")
        return self

    @property
    def connector_name(self) -> str:
        return self.connect.connector_name or f"{self.topic_prefix}-postgres"

    @property
    def dead_letter_topic(self) -> str:
        return self.dlq_topic or f"{self.topic_prefix}.dlq"

    @property
    def notification_topic(self) -> str:
        """Debezium's notifications (see connectors/debezium_config.ConnectorSettings)."""
        return f"{self.topic_prefix}.notifications"

    @property
    def transaction_topic(self) -> str:
        """Debezium's transaction metadata (see connectors/debezium_config.ConnectorSettings)."""
        return f"{self.topic_prefix}.transaction"

    @property
    def topic_pattern(self) -> str:
        """Every table topic of this prefix (a table added later joins without a restart). The
        heartbeat and signal tables' topics are read too though nothing of them is applied: Debezium
        snapshots those tables as well, and the snapshot's final record may land in either."""
        return rf"^{re.escape(self.topic_prefix)}\.[^.]+\.[^.]+$"

    def topic_for(self, table: TableConfig) -> str:
        return f"{self.topic_prefix}.{table.name}"

    @property
    def truncate_topic(self) -> str:
        """The topic of the truncate marker table (see connectors/postgres.py)."""
        return f"{self.topic_prefix}.{self.postgres.truncate_table}"

    @property
    def document_topics(self) -> dict[str, list[str]]:
        """Topic -> the documents it feeds (the truncate markers' topic and the transaction topic
        feed every document)."""
        out: dict[str, list[str]] = {}
        for doc in self.documents:
            for table in doc.tables():
                out.setdefault(f"{self.topic_prefix}.{table}", []).append(doc.name)
        if self.documents:
            out[self.truncate_topic] = [d.name for d in self.documents]
            out[self.transaction_topic] = [d.name for d in self.documents]
        return out

    @property
    def document_change_topics(self) -> list[str]:
        """The topics of changes the documents read: all theirs but the transaction topic (its records
        are no changes, and it grows with every heartbeat)."""
        return [t for t in self.document_topics if t != self.transaction_topic]

    @property
    def flat_tables(self) -> list[TableConfig]:
        """The tables with an index and keys of their own (all but those only documents read)."""
        return [t for t in self.tables if not t.documents_only]

    def table_for_topic(self, topic: str) -> TableConfig | None:
        return next((t for t in self.tables if self.topic_for(t) == topic), None)


def _check_url(v: str, schemes: tuple[str, ...]) -> str:
    parts = urlsplit(v)
    if parts.scheme not in schemes or not parts.hostname:
        raise ValueError(f"'{v}' is not a {'/'.join(schemes)} URL")
    if parts.password:
        raise ValueError("put credentials in the username/password fields (secret refs), not in the URL")
    return v.rstrip("/")


def _secret_refs(model: BaseModel, path: str = "") -> Iterator[tuple[str, SecretRef]]:
    for name in type(model).model_fields:
        value = getattr(model, name)
        here = f"{path}.{name}" if path else name
        if isinstance(value, SecretRef):
            yield here, value
        elif isinstance(value, BaseModel):
            yield from _secret_refs(value, here)


def _anchor_paths(model: BaseModel, base: Path) -> None:
    """Relative paths anywhere in the config (secret files, CA bundles, checkpoints) are relative
    to the config file, not the working directory."""
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, Path) and not value.is_absolute():
            object.__setattr__(model, name, (base / value).resolve())
        elif isinstance(value, BaseModel):
            _anchor_paths(value, base)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, BaseModel):
                    _anchor_paths(item, base)


def parse_config(data: Any, source: str = "config", base: Path | None = None, resolve_secrets: bool = True) -> Config:
    """`base`: the folder relative paths are relative to (the config file's). `resolve_secrets`:
    False checks a config whose secrets are to be found where it runs (a generated one)."""
    if not isinstance(data, dict):
        raise ConfigError("(top level)", f"{source} must be a mapping")
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
        raise ConfigError(field, err["msg"] + more) from None
    _check_disjoint_keys(config)
    _check_documents(config)
    for j, t in enumerate(config.tables):
        if t.lookups and "cache" not in config.sinks:
            raise ConfigError(f"tables.{j}.lookups", "lookups are Redis structures, and 'sinks' leaves the cache out")
    if base is not None:
        _anchor_paths(config, base)
    for field, ref in _secret_refs(config) if resolve_secrets else ():
        try:
            ref.resolve()
        except ValueError as exc:
            raise ConfigError(field, str(exc)) from None
    return config


def _check_disjoint_keys(config: Config) -> None:
    """Two tables' (or lookups') Redis keys must never match each other's pattern: a truncate, a
    verify or a count of one table scans its pattern and would take the other's keys for its own."""
    def matcher(template: str) -> re.Pattern:
        parts = string.Formatter().parse(template)
        return re.compile("".join(re.escape(lit) + (".*" if fld is not None else "") for lit, fld, _, _ in parts),
                          re.DOTALL)

    def sample(template: str) -> str:
        return "".join(lit + ("0" if fld is not None else "") for lit, fld, _, _ in string.Formatter().parse(template))

    owners = [(f"tables.{j}.redis_key", t.name, t.redis_key_template) for j, t in enumerate(config.tables)
              if not t.documents_only]
    owners += [(f"documents.{j}.redis_key", f"document {d.name}", d.redis_key_template)
               for j, d in enumerate(config.documents)]
    owners += [(f"tables.{j}.lookups.{n}.key", f"lookup {lk.key!r} of {t.name}", lk.key)
               for j, t in enumerate(config.tables) for n, lk in enumerate(t.lookups)]
    def prefix(template: str) -> str:
        return next(iter(string.Formatter().parse(template)))[0]

    lookups = {n for n, (f, _, _) in enumerate(owners) if ".lookups." in f}
    for i, (_, name_a, a) in enumerate(owners):
        for j, (field_b, name_b, b) in enumerate(owners):
            # A lookup's keys are sets scanned by verify: no other key may ever fall under its
            # pattern, so their literal prefixes must not extend one another (not only a sample).
            near = (i in lookups or j in lookups) and prefix(b).startswith(prefix(a))
            if i != j and (near or matcher(a).fullmatch(sample(b))):
                raise ConfigError(field_b, f"keys of {name_b} ({b!r}) match the key pattern of {name_a} ({a!r}): "
                                  "give each a distinct prefix")


def _check_documents(config: Config) -> None:
    """Every table a document names is captured and checked as a table of `tables` (the connector,
    the privilege and replica-identity checks, the truncate markers all work from that list): one
    not listed there is added as `documents_only` (no index or keys of its own); no document index
    is a table's."""
    listed = {t.name for t in config.tables}
    indexes = {t.index_name: t.name for t in config.flat_tables}
    for doc in config.documents:
        for _, table in doc.placements():
            if table not in listed:
                config.tables.append(TableConfig(name=table, documents_only=True))
                listed.add(table)
    for j, doc in enumerate(config.documents):
        if doc.index_name in indexes:
            raise ConfigError(f"documents.{j}.index", f"index {doc.index_name!r} is the index of table "
                              f"{indexes[doc.index_name]}: give the document its own")
        indexes[doc.index_name] = f"document {doc.name}"


def load_config(path: str | Path) -> Config:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError("--config", f"no such file: {path}") from None
    except yaml.YAMLError as exc:
        raise ConfigError("(yaml)", f"{path} is not valid YAML: {exc}") from None
    return parse_config(data, str(path), base=path.parent)
