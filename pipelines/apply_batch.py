"""One micro-batch, from raw Kafka records to both stores. Plain Python: Spark only schedules it,
and the plain-consumer benchmark calls the same function."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Iterable

import pyarrow as pa

from connectors.envelope import RecordError, Tombstone, decode
from connectors.version import is_snapshot
from derived.cache import CacheTable, RedisCache
from derived.change import Change, DeadLetter, Position
from derived.reduce import last_per_key
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
    snapshot_reads: int = 0
    snapshot_last_lsn: int = 0          # set when the batch held the snapshot's final record
    newest_source_ts_ms: int | None = None


@dataclass
class Stores:
    search: SearchSink
    cache: RedisCache
    search_tables: dict[str, SearchTable]
    cache_tables: dict[str, CacheTable]
    key_columns: dict[str, list[str] | None] = field(default_factory=dict)


def stores_from_config(config: Config, generation: str = "", index_suffix: str = "") -> Stores:
    import redis

    from derived.search import ElasticsearchEngine, OpenSearchEngine

    s = config.search
    auth = (s.username, s.password.get()) if s.username and s.password else None
    engine_cls = ElasticsearchEngine if s.kind == "elasticsearch" else OpenSearchEngine
    engine = engine_cls(s.url, http_auth=auth, api_key=s.api_key.get() if s.api_key else None,
                        verify_certs=s.verify_certs, ca_certs=str(s.ca_certs) if s.ca_certs else None)
    rc = config.redis
    client = redis.Redis.from_url(rc.url, username=rc.username,
                                  password=rc.password.get() if rc.password else None,
                                  socket_timeout=10, socket_connect_timeout=5)
    search_tables = {t.name: SearchTable(t.index_name, t.columns, dict(t.rename), t.mappings) for t in config.tables}
    cache_tables = {t.name: CacheTable(t.redis_key_template, t.redis_format, t.redis_ttl_s, t.columns,
                                       dict(t.rename)) for t in config.tables}
    from derived.null_store import NullStore

    search = SearchSink(engine, chunk=s.bulk_chunk, index_suffix=index_suffix) if "search" in config.sinks else NullStore()
    cache = RedisCache(client, rc.deleted_version_ttl_s, generation=generation) if "cache" in config.sinks else NullStore()
    return Stores(search, cache, search_tables, cache_tables, {t.name: t.key for t in config.tables})


def decode_records(rows: Iterable[dict[str, Any]], fences: dict[str, int],
                   key_columns: dict[str, list[str] | None], known_tables: set[str]
                   ) -> tuple[list[Change], list[DeadLetter], int, int]:
    """Decode in offset order per partition, advancing each partition's snapshot fence as it goes.
    Also returns the snapshot's final-record marker (its lsn), wherever it is: the final record is
    often one of a table this pipeline does not sync (heartbeat, signal)."""
    changes: list[Change] = []
    dead: list[DeadLetter] = []
    tombstones = 0
    snapshot_last_lsn = 0
    for r in sorted(rows, key=lambda r: (r["topic"], r["partition"], r["offset"])):
        pos = Position(r["topic"], r["partition"], r["offset"])
        fence_key = f"{pos.topic}:{pos.partition}"
        try:
            table_hint = None
            out = decode(r["key"], r["value"], pos, fences.get(fence_key, 0))
            if isinstance(out, Tombstone):
                tombstones += 1
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


def apply_records(rows: list[dict[str, Any]], stores: Stores, fences: dict[str, int], dlq) -> BatchStats:
    stats = BatchStats(records=len(rows))
    changes, dead, stats.tombstones, stats.snapshot_last_lsn = decode_records(
        rows, fences, stores.key_columns, set(stores.search_tables))
    truncates, latest = last_per_key(changes)
    for t in sorted(truncates, key=lambda c: c.version):
        stores.search.truncate(t, stores.search_tables[t.table])
        stores.cache.truncate(t, stores.cache_tables[t.table])
        stats.truncates += 1
    search = stores.search.apply(latest, stores.search_tables)
    cache = stores.cache.apply(latest, stores.cache_tables)
    raw = {(r["topic"], r["partition"], r["offset"]): r for r in rows}
    for letter in search.dead:
        src = raw.get((letter.position.topic, letter.position.partition, letter.position.offset), {})
        letter.key, letter.value = src.get("key"), src.get("value")
    dead.extend(search.dead)
    stats.dead_letters = dlq.write(dead) if dead else 0
    stats.search_applied, stats.search_stale = search.applied, search.stale
    stats.cache_applied, stats.cache_stale = cache.applied, cache.stale
    stats.snapshot_reads = sum(1 for c in changes if c.snapshot)
    stamps = [c.source_ts_ms for c in changes if c.source_ts_ms and not c.snapshot]
    stats.newest_source_ts_ms = max(stamps) if stamps else None
    return stats


def rows_from_arrow(table: pa.Table) -> list[dict[str, Any]]:
    cols = table.select(["key", "value", "topic", "partition", "offset"]).to_pydict()
    return [dict(key=k, value=v, topic=t, partition=p, offset=o)
            for k, v, t, p, o in zip(cols["key"], cols["value"], cols["topic"], cols["partition"], cols["offset"])]
