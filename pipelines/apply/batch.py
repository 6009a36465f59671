"""One micro-batch, from raw Kafka records to both stores. Plain Python: Spark only schedules it,
and the plain-consumer benchmark calls the same function."""
from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Iterable

import pyarrow as pa

from connectors.envelope import RecordError, Tombstone, decode, document_id
from derived.cache import CacheTable, RedisCache
from derived.change import UNKNOWN, Change, DeadLetter, Position, Version
from derived.reduce import last_per_key, merge_cuts, settle_tombstones
from derived.search import SearchSink, SearchTable
from pipelines.config import Config

log = logging.getLogger(__name__)


@dataclass
class BatchStats:
    records: int = 0
    tombstones: int = 0
    dead_letters: int = 0
    search_applied: int = 0
    search_stale: int = 0
    cache_applied: int = 0
    cache_stale: int = 0
    truncates: int = 0
    truncate_cuts: dict[str, Version] = field(default_factory=dict)  # deferred truncates: table -> cut
    snapshot_reads: int = 0
    snapshot_last_lsn: int = 0          # set when the batch held the snapshot's final record
    newest_source_ts_ms: int | None = None
    visible_ms: list[int] = field(default_factory=list)  # sampled commit-to-applied times of streamed changes
    toast_reread: int = 0               # changes whose unchanged TOAST columns were read from Postgres


@dataclass
class Stores:
    search: SearchSink
    cache: RedisCache
    search_tables: dict[str, SearchTable]
    cache_tables: dict[str, CacheTable]
    key_columns: dict[str, list[str] | None] = field(default_factory=dict)
    truncate_table: str | None = None
    toast: Any = None   # pipelines.apply.toast_reread.ToastReread, or None (tests)

    @property
    def tables(self) -> set[str]:
        return set(self.key_columns)


@dataclass(frozen=True)
class Targets:
    """A rebuild's fresh generations: search indices per table and a spare Redis database."""

    search: tuple[tuple[str, str], ...] = ()   # (schema.table, concrete index)
    cache_db: int | None = None

    def __bool__(self) -> bool:
        return bool(self.search) or self.cache_db is not None

    def as_json(self) -> dict[str, Any]:
        return {"search": dict(self.search), "cache_db": self.cache_db}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "Targets":
        data = data or {}
        return cls(tuple(sorted((data.get("search") or {}).items())), data.get("cache_db"))


_writers = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cdckit-search")


def redis_client(config: Config, db: int | None = None):
    import redis

    rc = config.redis
    tls = {"ssl_ca_certs": str(rc.ca_certs)} if rc.ca_certs and rc.url.startswith("rediss:") else {}
    return redis.Redis.from_url(rc.url if db is None else rc.url_for(db), username=rc.username,
                                password=rc.password.get() if rc.password else None,
                                socket_timeout=10, socket_connect_timeout=5, **tls)


def search_engine(config: Config):
    from derived.search import ElasticsearchEngine, OpenSearchEngine

    s = config.search
    auth = (s.username, s.password.get()) if s.username and s.password else None
    engine_cls = ElasticsearchEngine if s.kind == "elasticsearch" else OpenSearchEngine
    return engine_cls(s.url, http_auth=auth, api_key=s.api_key.get() if s.api_key else None,
                      verify_certs=s.verify_certs, ca_certs=str(s.ca_certs) if s.ca_certs else None)


def _search_sink(config: Config, live: bool) -> SearchSink:
    s = config.search
    return SearchSink(search_engine(config), chunk=s.bulk_chunk, max_document_bytes=s.max_document_bytes,
                      require_alias=live, gc_deletes_s=s.deleted_version_ttl_s)


def stores_from_config(config: Config, targets: Targets | None = None) -> Stores:
    """The live stores (through the alias and the live database), or, given `targets`, only a
    rebuild's fresh generations."""
    from derived.null_store import NullStore

    search_tables = {t.name: SearchTable(t.index_name, t.columns, dict(t.rename), t.mappings) for t in config.tables}
    cache_tables = {t.name: CacheTable(t.redis_key_template, t.redis_format, t.redis_ttl_s, t.columns,
                                       dict(t.rename)) for t in config.tables}
    rc = config.redis
    if targets is None:
        search = _search_sink(config, live=True) if "search" in config.sinks else NullStore()
        cache = (RedisCache(redis_client(config), rc.deleted_version_ttl_s) if "cache" in config.sinks
                 else NullStore())
    else:
        indexes = dict(targets.search)
        search_tables = {name: SearchTable(indexes[name], t.columns, t.rename, t.mappings)
                         for name, t in search_tables.items() if name in indexes}
        search = _search_sink(config, live=False) if indexes else NullStore()
        cache = (RedisCache(redis_client(config, targets.cache_db), rc.deleted_version_ttl_s)
                 if targets.cache_db is not None else NullStore())
    from pipelines.apply.toast_reread import ToastReread

    return Stores(search, cache, search_tables, cache_tables, {t.name: t.key for t in config.tables},
                  config.postgres.truncate_table, ToastReread(config.postgres.dsn_kwargs()))


def table_of_topic(topic: str) -> str:
    """`<prefix>.<schema>.<table>` -> schema.table (table names have no dots: see config)."""
    return ".".join(topic.rsplit(".", 2)[-2:])


def _tombstone_delete(t: Tombstone, table: str, key_columns: list[str] | None) -> Change | None:
    try:
        doc_id = document_id(t.key, key_columns)
    except RecordError:
        return None  # custom key columns the record key lacks: only the op=d record can tell
    return Change(table, "delete", t.key, doc_id, None, UNKNOWN, t.position, tombstone=True)


def decode_records(rows: Iterable[dict[str, Any]], fences: dict[str, int],
                   key_columns: dict[str, list[str] | None], known_tables: set[str],
                   tombstones_out: list[Change] | None = None, truncate_table: str | None = None
                   ) -> tuple[list[Change], list[DeadLetter], int, int]:
    """Decode in offset order per partition, advancing each partition's snapshot fence as it goes.
    Also returns the snapshot's final-record marker (its lsn), wherever it is: the final record is
    often one of a table this pipeline does not sync (heartbeat, signal). Tombstones of synced
    tables go to `tombstones_out` as deletes of their key (see derived/reduce.settle_tombstones)."""
    changes: list[Change] = []
    dead: list[DeadLetter] = []
    tombstones = 0
    snapshot_last_lsn = 0
    for r in sorted(rows, key=lambda r: (r["topic"], r["partition"], r["offset"])):
        pos = Position(r["topic"], r["partition"], r["offset"])
        fence_key = f"{pos.topic}:{pos.partition}"
        try:
            table_hint = None
            out = decode(r["key"], r["value"], pos, fences.get(fence_key, 0), truncate_table=truncate_table)
            if out is None:
                continue  # a truncate marker row that marks nothing new
            if isinstance(out, Tombstone):
                tombstones += 1
                table = table_of_topic(pos.topic)
                if tombstones_out is not None and out.key and table in known_tables:
                    deleted = _tombstone_delete(out, table, key_columns.get(table))
                    if deleted is not None:
                        tombstones_out.append(deleted)
                continue
            table_hint = out.table
            if out.snapshot_last:
                snapshot_last_lsn = max(snapshot_last_lsn, out.version.lsn)
            if out.table not in known_tables:
                continue  # a captured table this config does not sync (e.g. the signal table)
            if key_columns.get(out.table) and out.op != "truncate":
                out = decode(r["key"], r["value"], pos, fences.get(fence_key, 0), key_columns[out.table])
        except RecordError as exc:
            dead.append(DeadLetter(pos, r["key"], r["value"], "decode", str(exc),
                                   {"table": table_hint} if table_hint else {}))
            continue
        if out.snapshot:
            fences[fence_key] = max(fences.get(fence_key, 0), out.version.lsn)
        changes.append(out)
    return changes, dead, tombstones, snapshot_last_lsn


@dataclass(frozen=True)
class ApplyOptions:
    """defer_truncates: the batch's truncates are not applied but returned in
    `stats.truncate_cuts`. Partitions are applied in parallel Spark tasks, and a row older than a
    truncate may be written by another task after this one's truncate: the driver applies the
    cuts once every task of the batch is done (`apply_truncates`)."""

    defer_truncates: bool = False
    # Truncates applied in earlier batches: a change older than its table's cut is already removed
    # (another partition can deliver it after the truncate's marker was applied).
    known_cuts: dict[str, Version] = field(default_factory=dict)
    # The rebuild's catch-up: writes a fresh generation only (see apply_records on TOAST columns).
    fresh_generation: bool = False


SPARK_TASK = ApplyOptions(defer_truncates=True)


def apply_records(rows: list[dict[str, Any]], stores: Stores, fences: dict[str, int], dlq,
                  rebuild: Stores | None = None, how: "ApplyOptions | None" = None) -> BatchStats:
    """Decode, reduce, apply. During a rebuild the same changes also go to its fresh generation,
    first: a change then reaches the new generation whether the switch happens before or after
    its live write (its rejections are the live write's, already dead-lettered).

    See ApplyOptions for what Spark tasks and the rebuild's catch-up do differently."""
    how = how or ApplyOptions()
    stats = BatchStats(records=len(rows))
    tombstones: list[Change] = []
    changes, dead, stats.tombstones, stats.snapshot_last_lsn = decode_records(
        rows, fences, stores.key_columns, stores.tables, tombstones, stores.truncate_table)
    truncates, latest = last_per_key(changes)
    if how.known_cuts:
        latest = [c for c in latest if not (c.table in how.known_cuts and c.version < how.known_cuts[c.table])]
    deletes_at = {(c.position.topic, c.position.partition, c.position.offset) for c in changes if c.op == "delete"}
    latest = settle_tombstones(latest, tombstones, deletes_at)
    if stores.toast is not None:
        # While a rebuild fills a fresh generation, that generation may not hold a key's older row
        # yet (the catch-up writes it, in parallel): there every unchanged TOAST column is read.
        stats.toast_reread = stores.toast.fill(latest, every_upsert=rebuild is not None or how.fresh_generation)
    if how.defer_truncates:
        stats.truncate_cuts, truncates = newest_cuts(truncates), []
        stats.truncates = len(stats.truncate_cuts)
    fresh_dead: list[DeadLetter] = []
    if rebuild is not None:
        apply_changes(rebuild, truncates, latest, BatchStats(), fresh_dead, rows)
    apply_changes(stores, truncates, latest, stats, dead, rows)
    dead.extend(fresh_generation_letters(fresh_dead, dead))
    stats.dead_letters = dlq.write(dead) if dead else 0
    stats.snapshot_reads = sum(1 for c in changes if c.snapshot)
    stamps = [c.source_ts_ms for c in changes if c.source_ts_ms and not c.snapshot]
    stats.newest_source_ts_ms = max(stamps) if stamps else None
    if stamps:
        # Commit (Debezium's source.ts_ms) to applied in both stores, sampled to bound the stats' size.
        now_ms = int(time.time() * 1000)
        stats.visible_ms = [now_ms - ts for ts in stamps[::max(1, len(stamps) // VISIBLE_SAMPLES)]]
    return stats


VISIBLE_SAMPLES = 200


def fresh_generation_letters(fresh: list[DeadLetter], live: list[DeadLetter]) -> list[DeadLetter]:
    """A rebuild's fresh generation may refuse what the live one took (a rebuild is often run for
    new mappings): its rejections are letters too, marked, unless the live write refused the same
    record already (one letter per record is enough to replay it)."""
    seen = {(d.position.topic, d.position.partition, d.position.offset) for d in live}
    out = [d for d in fresh if (d.position.topic, d.position.partition, d.position.offset) not in seen]
    for d in out:
        d.extra["generation"] = "rebuild"
    return out


def apply_changes(stores: Stores, truncates: list[Change], latest: list[Change], stats: BatchStats,
                  dead: list[DeadLetter], rows: list[dict[str, Any]]) -> None:
    """Reduced changes into both stores, each getting only the tables it holds; the search
    engine's per-document rejections join `dead` with their raw record. Truncates come last:
    a truncate removes what is older than it, so a change of the same batch that it cuts must be
    written first (a newer one survives it by version)."""
    # The two stores are independent: write them at the same time (each waits on its server).
    to_search = [c for c in latest if c.table in stores.search_tables]
    to_cache = [c for c in latest if c.table in stores.cache_tables]
    pending_search = _writers.submit(stores.search.apply, to_search, stores.search_tables)
    cache = stores.cache.apply(to_cache, stores.cache_tables)
    search = pending_search.result()
    raw = {(r["topic"], r["partition"], r["offset"]): r for r in rows}
    for letter in [*search.dead, *cache.dead]:
        src = raw.get((letter.position.topic, letter.position.partition, letter.position.offset), {})
        letter.key, letter.value = src.get("key"), src.get("value")
    dead.extend(search.dead)
    dead.extend(cache.dead)
    stats.search_applied += search.applied
    stats.search_stale += search.stale
    stats.cache_applied += cache.applied
    stats.cache_stale += cache.stale
    stats.truncates += apply_truncates(stores, newest_cuts(truncates))


def newest_cuts(truncates: Iterable[Change]) -> dict[str, Version]:
    """The newest truncate per table: it removes everything an older one would."""
    return merge_cuts(*({t.table: t.version} for t in truncates))


def apply_truncates(stores: Stores, cuts: dict[str, Version]) -> int:
    """Remove, at each cut's version, every entry of its table not written after it."""
    for table, version in cuts.items():
        marker = Change(table, "truncate", {}, "", None, version, Position("", 0, 0))
        if table in stores.search_tables:
            stores.search.truncate(marker, stores.search_tables[table])
        if table in stores.cache_tables:
            stores.cache.truncate(marker, stores.cache_tables[table])
    return len(cuts)


def rows_from_arrow(table: pa.Table) -> list[dict[str, Any]]:
    cols = table.select(["key", "value", "topic", "partition", "offset"]).to_pydict()
    return [dict(key=k, value=v, topic=t, partition=p, offset=o)
            for k, v, t, p, o in zip(cols["key"], cols["value"], cols["topic"], cols["partition"], cols["offset"])]
