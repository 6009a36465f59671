"""The stores a batch is applied to, built from the config: the live ones (through the alias and
the live database), or a rebuild's fresh generations; the clients they use; and each index's
definition as the config and the catalog make it (at the end: the column types come from Postgres),
for whatever creates an index on the driver (the job's first generation, a rebuild's fresh one).
How the live index compares is pipelines/ops/index_comparison.py's."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from derived.sinks.cache.sink import CacheTable, RedisCache
from derived.sinks.protocol import Sink
from derived.sinks.search.definition import (DefinitionOptions, document_definition, flat_settings, index_definition,
                                             index_settings)
from derived.sinks.search.sink import SearchSink, SearchTable
from pipelines.apply.column_types import ColumnTypes
from pipelines.apply.row_filters import RowFilters
from pipelines.apply.toast_reread import ToastReread
from pipelines.config import Config, TableConfig
from pipelines.document_config import DocumentConfig
from pipelines.state.rebuild_state import Targets


@dataclass
class Stores:
    search: Sink      # SearchSink, or NullStore when the config does not write it
    cache: Sink       # RedisCache, or NullStore
    search_tables: dict[str, SearchTable]
    cache_tables: dict[str, CacheTable]
    key_columns: dict[str, list[str] | None] = field(default_factory=dict)
    truncate_table: str | None = None
    toast: Any = None   # pipelines.apply.toast_reread.ToastReread, or None (tests)
    # Documents are rendered by column type (pipelines/apply/typed_rows.py); None: rows as Debezium sends them (tests).
    types: ColumnTypes | None = None
    numbers: dict[str, frozenset[str]] = field(default_factory=dict)  # numeric columns rendered as numbers
    filters: Any = None   # pipelines.apply.row_filters.RowFilters: the tables' row filters, or None
    whole_rows: frozenset[str] = frozenset()   # tables whose upserts need every column (filters, transforms)
    hooks: dict[str, str] = field(default_factory=dict)   # table -> its transform hook, "module:function"
    # table -> the columns its Redis lookups read: an upsert without one of them (an unchanged TOAST
    # column) is read from Postgres, as a whole-row table's is.
    lookup_columns: dict[str, frozenset[str]] = field(default_factory=dict)

    def needs_whole_row(self, change) -> bool:
        """An upsert with unchanged TOAST columns that its table's filter, transform or lookups need."""
        return bool(change.op == "upsert" and change.unavailable and (
            change.table in self.whole_rows
            or not self.lookup_columns.get(change.table, frozenset()).isdisjoint(change.unavailable)))

    @property
    def tables(self) -> set[str]:
        return set(self.key_columns)

    def by_name(self, names) -> dict[str, Sink]:
        """The sinks of these names ("search", "cache": the config's `sinks`)."""
        return {n: getattr(self, n) for n in ("search", "cache") if n in names}


def redis_client(config: Config, db: int | None = None):
    import redis

    rc = config.redis
    tls = {"ssl_ca_certs": str(rc.ca_certs)} if rc.ca_certs and rc.url.startswith("rediss:") else {}
    return redis.Redis.from_url(rc.url if db is None else rc.url_for(db), username=rc.username,
                                password=rc.password.get() if rc.password else None,
                                socket_timeout=rc.timeout_s, socket_connect_timeout=min(5.0, rc.timeout_s), **tls)


def search_engine(config: Config):
    from derived.sinks.search.engines import ElasticsearchEngine, OpenSearchEngine

    s = config.search
    auth = (s.username, s.password.get()) if s.username and s.password else None
    engine_cls = ElasticsearchEngine if s.kind == "elasticsearch" else OpenSearchEngine
    return engine_cls(s.url, http_auth=auth, api_key=s.api_key.get() if s.api_key else None,
                      verify_certs=s.verify_certs, ca_certs=str(s.ca_certs) if s.ca_certs else None, timeout=s.timeout_s)


def _search_sink(config: Config, live: bool) -> SearchSink:
    s = config.search
    return SearchSink(search_engine(config), chunk=s.bulk_chunk, max_document_bytes=s.max_document_bytes,
                      require_alias=live, gc_deletes_s=s.deleted_version_ttl_s)


def live_sinks(config: Config, names=None) -> dict[str, Sink]:
    """The live stores the config writes (or those of them in `names`), by name ("search",
    "cache"), without the rest of Stores (the tables' types, filters, TOAST reads): for what only
    publishes or reads marks."""
    out: dict[str, Sink] = {}
    wanted = [n for n in config.sinks if names is None or n in names]
    if "search" in wanted:
        out["search"] = _search_sink(config, live=True)
    if "cache" in wanted:
        out["cache"] = RedisCache(redis_client(config), config.redis.deleted_version_ttl_s)
    return out


def search_generations(config: Config):
    """The search store's generations, for a rebuild (derived/sinks/search/generations.py): made
    from the engine, as the cache's are from its clients."""
    from derived.sinks.search.generations import SearchGenerations

    return SearchGenerations(search_engine(config), config.search.deleted_version_ttl_s)


def cache_generations(config: Config, live_db: int, spare_db: int):
    """The cache's generations, for a rebuild: the live and the spare database as its plan names them."""
    from derived.sinks.cache.generations import CacheGenerations

    return CacheGenerations(redis_client(config), redis_client(config, spare_db), live_db, spare_db)


def stores_from_config(config: Config, targets: Targets | None = None) -> Stores:
    """The live stores (through the alias and the live database), or, given `targets`, only a
    rebuild's fresh generations."""
    from derived.sinks.memory import NullStore

    search_tables = {t.name: SearchTable(t.index_name, t.columns, dict(t.rename), dict(t.transform.fields),
                                         t.transform.removed("search"), refresh_interval=refresh_interval(config, t))
                     for t in config.flat_tables}
    cache_tables = {t.name: CacheTable(t.redis_key_template, t.redis_format, t.redis_ttl_s, t.columns,
                                       dict(t.rename), computed=dict(t.transform.fields),
                                       remove=t.transform.removed("cache"),
                                       lookups=tuple(lk.spec for lk in t.lookups))
                    for t in config.flat_tables}
    # Nested documents (pipelines/documents/documents_query.py) beside the tables, by their store names.
    search_tables.update({d.store_table: SearchTable(d.index_name, None, {}) for d in config.documents})
    cache_tables.update({d.store_table: CacheTable(d.redis_key_template, "json", None, None, {}, equal_replaces=True)
                         for d in config.documents})
    rc = config.redis
    if targets is None:
        live = live_sinks(config)
        search, cache = live.get("search") or NullStore(), live.get("cache") or NullStore()
    else:
        indexes = dict(targets.search)
        search_tables = {name: SearchTable(indexes[name], t.columns, t.rename, t.computed, t.remove)
                         for name, t in search_tables.items() if name in indexes}
        search = _search_sink(config, live=False) if indexes else NullStore()
        cache = (RedisCache(redis_client(config, targets.cache_db), rc.deleted_version_ttl_s)
                 if targets.cache_db is not None else NullStore())
    types = ColumnTypes(config.postgres.dsn_kwargs())
    return Stores(search, cache, search_tables, cache_tables, {t.name: t.key for t in config.tables},
                  config.postgres.truncate_table, ToastReread(config.postgres.dsn_kwargs(), types.table), types,
                  {t.name: frozenset(t.numeric_as_number) for t in config.tables},
                  RowFilters.from_config(config, types.table),
                  frozenset(t.name for t in config.tables if t.whole_rows),
                  {t.name: t.transform.hook for t in config.tables if t.transform.hook},
                  {t.name: frozenset(c for lk in t.lookups for c in lk.spec.columns) for t in config.tables if t.lookups})


# Index definitions.

def options_for(config: Config, table: TableConfig) -> DefinitionOptions:
    s = table.search
    settings = {**_flat(config.search.index_settings), **_flat(s.settings)}
    return DefinitionOptions(columns=table.columns, rename=dict(table.rename),
                             numeric_as_number=list(table.numeric_as_number), text=s.text, json=s.json_mode,
                             dynamic=s.dynamic, kind=config.search.kind, settings=settings,
                             mappings=dict(table.search_mappings), gc_deletes_s=config.search.deleted_version_ttl_s)


def refresh_interval(config: Config, table: TableConfig) -> str | None:
    """The refresh interval the config gives the table's index (None: the engine's default)."""
    value = options_for(config, table).settings.get("index.refresh_interval")
    return None if value is None else str(value)


def refresh_intervals(config: Config) -> dict[str, str | None]:
    """Index name -> the refresh interval the config gives it (None: the engine's default), for
    every index the job writes: the tables' and the documents' (those take search.index_settings)."""
    out = {t.index_name: refresh_interval(config, t) for t in config.flat_tables}
    documents = _flat(config.search.index_settings).get("index.refresh_interval")
    out.update({d.index_name: None if documents is None else str(documents) for d in config.documents})
    return out


def definition_for(config: Config, table: TableConfig, types: dict[str, str]) -> dict[str, Any]:
    """Pure: the definition for these column types (name -> format_type)."""
    return index_definition(types, options_for(config, table))


def document_definition_for(config: Config, doc: DocumentConfig, types: dict[str, dict[str, str]]) -> dict[str, Any]:
    """Pure: a nested document's definition for its tables' column types (table -> name -> type)."""
    options = {t.name: options_for(config, t) for t in config.tables}
    return document_definition(doc, types, options, _flat(config.search.index_settings),
                               config.search.deleted_version_ttl_s)


def definitions(config: Config, tables: list[str] | None = None, reader: bool = False) -> dict[str, dict[str, Any]]:
    """schema.table (or a document's 'document:<name>') -> definition, reading the column types
    from the catalog (a table gone from the database gets only what the config says)."""
    from connectors import postgres

    wanted = [t for t in config.flat_tables if tables is None or t.name in tables]
    documents = [d for d in config.documents if tables is None or d.store_table in tables]
    if not wanted and not documents:
        return {}
    names = {t.name for t in wanted} | {name for d in documents for name in d.tables()}
    pg = config.postgres
    with postgres.connect(pg.reader_dsn_kwargs() if reader else pg.dsn_kwargs()) as conn:
        types = {name: {c.name: c.type for c in postgres.table_columns(conn, name)} for name in sorted(names)}
    out = {t.name: definition_for(config, t, types[t.name]) for t in wanted}
    out.update({d.store_table: document_definition_for(config, d, types) for d in documents})
    return out


def marker_definition(config: Config) -> dict[str, Any]:
    """The store marker index (derived/sinks/markers.py) gets the shared settings and gc_deletes too."""
    return {"settings": index_settings(_flat(config.search.index_settings), config.search.deleted_version_ttl_s)}


def _flat(settings: dict[str, Any]) -> dict[str, Any]:
    return flat_settings(settings)
