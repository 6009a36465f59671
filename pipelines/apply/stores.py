"""The stores a batch is applied to, built from the config: the live ones (through the alias and
the live database), or a rebuild's fresh generations; and the clients they use."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from derived.sinks.cache.sink import CacheTable, RedisCache
from derived.sinks.protocol import Sink
from derived.sinks.search.sink import SearchSink, SearchTable
from pipelines.apply.column_types import ColumnTypes
from pipelines.apply.index_definitions import refresh_interval
from pipelines.apply.row_filters import RowFilters
from pipelines.apply.toast_reread import ToastReread
from pipelines.config import Config
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
                                socket_timeout=10, socket_connect_timeout=5, **tls)


def search_engine(config: Config):
    from derived.sinks.search.engines import ElasticsearchEngine, OpenSearchEngine

    s = config.search
    auth = (s.username, s.password.get()) if s.username and s.password else None
    engine_cls = ElasticsearchEngine if s.kind == "elasticsearch" else OpenSearchEngine
    return engine_cls(s.url, http_auth=auth, api_key=s.api_key.get() if s.api_key else None,
                      verify_certs=s.verify_certs, ca_certs=str(s.ca_certs) if s.ca_certs else None)


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
