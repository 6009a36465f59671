"""One micro-batch, from raw Kafka records to both stores. Plain Python: Spark only schedules it,
and the plain-consumer benchmark calls the same function."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Iterable

import pyarrow as pa

from connectors.envelope import decode_records
from derived.change import Change, DeadLetter, Position, Version
from derived.reduce import last_per_key, merge_cuts, settle_tombstones
from derived.sinks.store_errors import StoreUnavailable
from pipelines.apply import letter_kinds
from pipelines.apply.typed_rows import columns_seen, type_rows
from pipelines.apply.stats import BatchStats
from pipelines.apply.stores import Stores

_writers = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cdckit-search")


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
    # While a rebuild fills a fresh generation, that generation may not hold a key's older row
    # yet (the catch-up writes it, in parallel): there every unchanged TOAST column is read.
    stats.toast_reread, stats.filtered_out = prepare(stores, latest, every_upsert=rebuild is not None
                                                     or how.fresh_generation, dead=dead)
    if stores.hooks:   # a hook's letters carry their record, for `dlq replay`
        with_records([d for d in dead if d.stage == "transform"], rows)
    if how.defer_truncates:
        stats.truncate_cuts, truncates = newest_cuts(truncates), []
        stats.truncates = len(stats.truncate_cuts)
    fresh_dead: list[DeadLetter] = []
    if rebuild is not None:
        apply_changes(rebuild, truncates, latest, BatchStats(), fresh_dead, rows)
    apply_changes(stores, truncates, latest, stats, dead, rows)
    fresh = fresh_generation_letters(fresh_dead, dead)
    stats.fresh_dead_letters = len(fresh)   # the rebuild counts them before it switches
    dead.extend(fresh)
    stats.dead_letters = dlq.write(dead) if dead else 0
    stats.letter_kinds = letter_kinds.sample(dead) if dead else []
    stats.snapshot_reads = sum(1 for c in changes if c.snapshot)
    stamps = [c.source_ts_ms for c in changes if c.source_ts_ms and not c.snapshot]
    stats.newest_source_ts_ms = max(stamps) if stamps else None
    if stamps:
        # Commit (Debezium's source.ts_ms) to applied in both stores, sampled to bound the stats' size.
        now_ms = int(time.time() * 1000)
        stats.visible_ms = [now_ms - ts for ts in stamps[::max(1, len(stamps) // VISIBLE_SAMPLES)]]
    return stats


VISIBLE_SAMPLES = 200


def prepare(stores: Stores, changes: list[Change], every_upsert: bool = False,
            dead: list[DeadLetter] | None = None) -> tuple[int, int]:
    """What every path (the live batch, the bootstrap's bulk, the rebuild) does to its reduced
    changes before the stores see them, in this order: unchanged TOAST columns (and what Debezium
    could not render) read where no store can fill them (`every_upsert`: none can; a table whose
    filter or transform reads the row: every column is read), each store's row filter judged on the
    complete row as Debezium sends it, the values typed as documents hold them, then the tables'
    transform hooks (an exception is a dead letter in `dead`, and the change is not applied).
    Returns (rows read, store writes filtered out)."""
    filters, toast = stores.filters, stores.toast
    whole = [c for c in changes if stores.needs_whole_row(c)]
    for c in whole:
        c.reread = True
    if toast is not None:
        toast.mark_snapshot_dates(changes)   # BC dates the snapshot lost the era of
    reread = toast.fill(changes, every_upsert=every_upsert) if toast is not None else 0
    for c in whole:
        if c.unavailable:
            if toast is not None and toast.failed:   # it would be judged on part of the row: retry
                raise StoreUnavailable(f"postgres: unchanged TOAST columns {sorted(c.unavailable)} of {c.table} not "
                                       "read, and its filter, transform or lookups need the whole row")
            # Gone from Postgres since (deleted, re-keyed): its delete follows in the log. Written, it
            # would be a partial row a filter or transform judged or computed on part of.
            c.hidden = ("search", "cache")
    filtered = filters.judge(changes) if filters is not None else 0
    as_documents(stores, changes)
    if stores.hooks:
        from pipelines.apply.hooks import run_hooks

        changes[:] = run_hooks(changes, stores.hooks, dead if dead is not None else [])
    return reread, filtered


def for_store(changes: list[Change], store: str) -> list[Change]:
    """The changes as one store applies them: an upsert its row filter leaves out is a delete of
    the key at the same version (the row may have matched before), or nothing at all for a created
    key (no store holds an older row of it: a delete would only leave a version behind)."""
    return [replace(c, op="delete", row=None, unavailable=(), hidden=()) if store in c.hidden else c
            for c in changes if not (store in c.hidden and c.created)]


def as_documents(stores: Stores, changes: list[Change]) -> None:
    """Upserts' values typed by their columns' Postgres types, in place, before either store sees
    them: after the TOAST fill, which adds columns in Debezium's rendering."""
    if stores.types is not None:
        type_rows(changes, stores.types.of(columns_seen(changes)), stores.numbers)


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
    to_search = for_store([c for c in latest if c.table in stores.search_tables], "search")
    to_cache = for_store([c for c in latest if c.table in stores.cache_tables], "cache")
    pending_search = _writers.submit(stores.search.apply, to_search, stores.search_tables)
    cache = stores.cache.apply(to_cache, stores.cache_tables)
    search = pending_search.result()
    with_records([*search.dead, *cache.dead], rows)
    dead.extend(search.dead)
    dead.extend(cache.dead)
    stats.search_applied += search.applied
    stats.search_stale += search.stale
    stats.cache_applied += cache.applied
    stats.cache_stale += cache.stale
    stats.truncates += apply_truncates(stores, newest_cuts(truncates))


def with_records(letters: list[DeadLetter], rows: list[dict[str, Any]]) -> None:
    """Each letter given its raw record (key and value) from the batch's rows, for `dlq replay`."""
    if not letters:
        return
    raw = {(r["topic"], r["partition"], r["offset"]): r for r in rows}
    for letter in letters:
        src = raw.get((letter.position.topic, letter.position.partition, letter.position.offset), {})
        letter.key, letter.value = src.get("key"), src.get("value")


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
