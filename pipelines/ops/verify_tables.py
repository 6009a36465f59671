"""`cdckit verify`: wait until the pipeline has applied everything up to the database's current WAL
position, then compare every row (or a sample) with the search index and the cache.

Why that wait is sound: once the slot's confirmed_flush_lsn passes the target position, Kafka
Connect has committed Debezium's offsets beyond it, which it does only after the producer acked
every record before them; so every change up to the target is in Kafka, and once the pipeline's
committed offsets reach the topics' end offsets, it is in the stores. Heartbeats move the slot on
an idle database.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Iterator

import orjson

from connectors import postgres
from connectors.debezium_values import render, same
from connectors.typed_values import row_converter
from connectors.envelope import document_id
from derived.sinks.cache.keys import render_key
from derived.shape import shape
from pipelines.state import documents_state
from pipelines.state.query_offsets import applied_offsets
from pipelines.config import Config, TableConfig
from pipelines.errors import NotCaughtUp
from pipelines.ops.verify_report import BATCH, StoreDiff, TableReport, chunks
from pipelines.ops.verify_values import ColumnReader, rendered


@dataclass
class VerifyReport:
    exact: bool
    waited_s: float
    target_lsn: int
    tables: list[TableReport]

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def wait_applied(config: Config, timeout_s: float) -> tuple[int, float]:
    started = time.monotonic()
    with postgres.connect(config.postgres.reader_dsn_kwargs()) as conn:
        target = postgres.current_wal_lsn(conn)
        while True:
            info = postgres.slot_info(conn, config.postgres.slot)
            if info is not None and (info.confirmed_flush_lsn or 0) >= target:
                break
            if time.monotonic() - started > timeout_s:
                raise NotCaughtUp(f"the slot {config.postgres.slot} has not confirmed WAL position {target} "
                                  f"within {timeout_s:g} s (connector stopped? heartbeats off?)")
            time.sleep(0.5)
    from connectors.kafka.offsets import end_offsets

    end = end_offsets(config.kafka.client_config(), [config.topic_for(t) for t in config.tables])
    _wait_committed(config.spark.checkpoint_dir, end, started, timeout_s)
    if config.documents:  # and the documents' query, over the topics it reads
        # Not the transaction topic: a query that stopped (`bootstrap --once`) reads none of its heartbeats.
        end = end_offsets(config.kafka.client_config(), config.document_change_topics)
        _wait_committed(documents_state.current(config.spark.checkpoint_dir), end, started, timeout_s,
                        documents_state.applied)
    return target, time.monotonic() - started


def _wait_committed(checkpoint_dir, end, started: float, timeout_s: float, applied=None) -> None:
    while True:
        committed = (applied or applied_offsets)(checkpoint_dir) or {}
        if all(int(committed.get(t, {}).get(p, 0)) >= int(o) for t, parts in end.items() for p, o in parts.items()):
            return
        if time.monotonic() - started > timeout_s:
            raise NotCaughtUp(f"the pipeline has not applied the topics up to {end} within {timeout_s:g} s "
                              f"(committed: {committed}); is `cdckit run` running?")
        time.sleep(0.5)


def _primary_key(conn, table: str) -> list[str]:
    rows = conn.execute("SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
                        "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary "
                        "ORDER BY array_position(i.indkey, a.attnum)", (table,)).fetchall()
    return [r[0] for r in rows]


def _rows(conn, reader: ColumnReader, sample: int | None) -> Iterator[dict[str, Any]]:
    """Every row (or a sample), each value read from Postgres's text (pipelines/ops/verify_values.py):
    no value stops the read."""
    from psycopg import sql

    query = reader.sql()
    if sample:
        query = sql.SQL("{} ORDER BY random() LIMIT {}").format(query, sql.Literal(int(sample)))
    with conn.cursor(name=f"cdckit_verify_{int(time.time() * 1000)}") as cur:
        cur.itersize = 5000
        cur.execute(query)
        for values in cur:
            yield reader.row(values)


def _compare(doc: dict[str, Any], expected: dict[str, Any], types: dict[str, str], table: TableConfig,
             as_strings: bool) -> str | None:
    """The first field that differs, or None."""
    reverse = {table.rename.get(c, c): c for c in types}
    for fld in sorted(set(doc) | set(expected)):
        want, got = expected.get(fld), doc.get(fld)
        pg_type = types.get(reverse.get(fld, fld), "")
        if as_strings:  # hash format: every value is a string
            from derived.sinks.cache.sink import hash_value

            want = hash_value(want)
        if not same(got, want, pg_type):
            return fld
    return None


def verify_table(config: Config, table: TableConfig, stores, sample: int | None) -> TableReport:
    report = TableReport(table.name, stores={s: StoreDiff() for s in config.sinks})
    search_t, cache_t = stores.search_tables[table.name], stores.cache_tables[table.name]
    seen = {s: 0 for s in config.sinks}
    with postgres.connect(config.postgres.reader_dsn_kwargs(), autocommit=False) as conn:
        types = postgres.column_types(conn, table.name)
        postgres.load_as_debezium(conn)
        reader = ColumnReader(conn, table.name)
        key_cols = table.key or _primary_key(conn, table.name)
        # The pipeline's own typing of Debezium's rendering (ids and keys stay in the rendering).
        typed = row_converter(types, frozenset(table.numeric_as_number))
        # Each store's row filter, judged on the same rendering as the pipeline judges it.
        keeps = _filters(config, table, types)
        lookups = () if sample is not None or "cache" not in config.sinks else cache_t.lookups
        expected_entries: dict[tuple[str, str], str] = {}
        for chunk in chunks(_rows(conn, reader, sample), BATCH):
            report.rows += len(chunk)
            wire = [{c: rendered(v, types.get(c, "")) for c, v in row.items()} for row in chunk]
            ids = [document_id({c: r[c] for c in key_cols}, key_cols) for r in wire]
            kept = {s: [keep is None or keep(r) for r in wire] for s, keep in keeps.items()}
            # The hook runs on the rows some store keeps, as in the pipeline; None: it refused the row.
            docs_of = [_hooked(typed(r), table, report) if any(k[n] for k in kept.values()) else None
                       for n, r in enumerate(wire)]
            if "search" in config.sinks:
                expected = {i: shape(d, search_t) for i, d, k in zip(ids, docs_of, kept["search"]) if k and d is not None}
                docs = stores.search.engine.mget(search_t.alias, list(expected))
                seen["search"] += len(docs)
                _diff(report.stores["search"], expected, docs, types, table, as_strings=False)
            if "cache" in config.sinks:
                rows = [(i, shape(d, cache_t), r) for i, d, r, k in zip(ids, docs_of, wire, kept["cache"])
                        if k and d is not None]
                expected = {i: d for i, d, _ in rows}
                keys = [render_key(cache_t.key_template, {c: r[c] for c in key_cols}, i) for i, _, r in rows]
                docs = _cache_docs(stores.cache, cache_t, dict(zip(expected, keys)))
                seen["cache"] += len(docs)
                _diff(report.stores["cache"], expected, docs, types, table, as_strings=cache_t.format == "hash")
                if lookups:
                    _expect_entries(expected_entries, lookups, ids, docs_of, kept["cache"], report)
    if sample is None:
        _extras(report, stores, search_t, cache_t, seen, config, table, key_cols, keeps)
        if lookups:
            from pipelines.ops.verify_lookups import compare_lookups

            compare_lookups(report.stores["cache"], stores.cache.r, lookups, expected_entries)
    return report


def _expect_entries(out: dict[tuple[str, str], str], lookups, ids, docs, kept, report: TableReport) -> None:
    """The lookup entries of the rows the cache keeps, from the rows as the pipeline types them."""
    from derived.sinks.cache.lookups import LookupValueError, entries

    for doc_id, doc, keep in zip(ids, docs, kept):
        if not keep or doc is None:
            continue
        try:
            for key, member, score in entries(lookups, doc, doc_id):
                out[(key, member)] = score
        except LookupValueError as exc:   # the pipeline dead-lettered this row's write
            report.stores["cache"].add("different", {"id": doc_id, "field": "(lookups)", "postgres": str(exc),
                                                     "store": None})


def _hooked(row: dict[str, Any], table: TableConfig, report: TableReport) -> dict[str, Any] | None:
    """The row as the table's transform hook makes it (pipelines/apply/hooks.py); None, counted as a
    difference in both stores, when the hook refuses it (the pipeline dead-lettered it too)."""
    if not table.transform.hook:
        return row
    from pipelines.apply.hooks import call_hook, load_hook

    try:
        return call_hook(load_hook(table.transform.hook), row)
    except Exception as exc:  # noqa: BLE001 - a user's function
        for diff in report.stores.values():
            diff.add("different", {"id": "-", "field": "(transform hook)", "store": None,
                                   "postgres": f"{type(exc).__name__}: {str(exc)[:200]}"})
        return None


def _filters(config: Config, table: TableConfig, types: dict[str, str]) -> dict[str, Any]:
    """store -> its row filter of the table, None for every row."""
    from connectors.row_filter import store_predicate

    return {s: store_predicate(*table.row_filter(s), types) if table.filtered else None for s in config.sinks}


def _diff(diff: StoreDiff, expected, docs, types, table, as_strings: bool) -> None:
    for doc_id, want in expected.items():
        got = docs.get(doc_id)
        if got is None:
            diff.add("missing", doc_id)
            continue
        fld = _compare(got, want, types, table, as_strings)
        if fld is not None:
            diff.add("different", {"id": doc_id, "field": fld, "postgres": want.get(fld), "store": got.get(fld)})


def _cache_docs(cache, table, keys: dict[str, str]) -> dict[str, dict[str, Any]]:
    r = cache.r
    names = list(keys.values())
    if table.format == "json":
        values = r.mget(names)
        return {i: orjson.loads(v) for i, v in zip(keys, values) if v is not None}
    pipe = r.pipeline(transaction=False)
    for name in names:
        pipe.hgetall(name)
    return {i: {k.decode(): v.decode() for k, v in h.items()} for i, h in zip(keys, pipe.execute()) if h}


def _extras(report, stores, search_t, cache_t, seen, config, table, key_cols, keeps) -> None:
    """Documents the database no longer has, or that the store's row filter leaves out. Counted
    first; enumerated only when counts disagree."""
    if "search" in config.sinks:
        stores.search.engine.refresh(search_t.alias)
        if stores.search.engine.count(search_t.alias) > seen["search"]:
            present = {i for i, _ in _all_keys(config, table, key_cols, keeps["search"])}
            for doc_id in stores.search.engine.scan_ids(search_t.alias):
                if doc_id not in present:
                    report.stores["search"].add("extra", doc_id)
    if "cache" in config.sinks:
        if stores.cache.count(cache_t, exact=True) > seen["cache"]:
            present_keys = {render_key(cache_t.key_template, k, i)
                            for i, k in _all_keys(config, table, key_cols, keeps["cache"])}
            for key in stores.cache.r.scan_iter(match=cache_t.pattern(), count=1000):
                key = key.decode()
                if not key.startswith("cdckit:") and key not in present_keys:
                    report.stores["cache"].add("extra", key)


def _all_keys(config: Config, table: TableConfig, key_cols: list[str], keep=None):
    """(id, key) of every row (the filter `keep` holds)."""
    from connectors.row_filter import predicate_columns

    with postgres.connect(config.postgres.reader_dsn_kwargs(), autocommit=False) as conn:
        types = postgres.column_types(conn, table.name)
        postgres.load_as_debezium(conn)
        reader = ColumnReader(conn, table.name)
        extra = sorted(set().union(*(predicate_columns(*table.row_filter(s)) for s in config.sinks))
                       - set(key_cols)) if keep is not None else []
        columns = key_cols + [c for c in extra if c in types]
        with conn.cursor(name="cdckit_verify_keys") as cur:
            cur.itersize = 20000
            cur.execute(reader.sql(columns))
            for row in cur:
                values = {c: rendered(v, types.get(c, "")) for c, v in reader.row(row, columns).items()}
                if keep is not None and not keep(values):
                    continue
                key = {c: values[c] for c in key_cols}
                yield document_id(key, key_cols), key


def verify(config: Config, table: str | None = None, sample: int | None = None, timeout_s: float = 120
           ) -> VerifyReport:
    from pipelines.apply.stores import stores_from_config
    from pipelines.errors import ConfigError

    chosen = [t for t in config.flat_tables if table is None or t.name == table]
    documents = [d for d in config.documents if table in (None, d.name, d.store_table)]
    if not chosen and not documents:
        raise ConfigError("--table", f"{table} is not a table or a document of the config")
    target, waited = wait_applied(config, timeout_s)
    stores = stores_from_config(config)
    reports = [verify_table(config, t, stores, sample) for t in chosen]
    if documents:
        from pipelines.ops.verify_documents import verify_documents

        reports += verify_documents(config, stores, None if table is None else documents[0].name)
    exact = all(d.clean for r in reports for d in r.stores.values())
    return VerifyReport(exact, round(waited, 1), target, reports)
