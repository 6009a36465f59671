"""Search index sink: versioned bulk writes through an alias, for Elasticsearch and OpenSearch.

External versions (`external_gte`) make every write idempotent and order-independent: a 409 is
"the index already holds something newer", not an error. Deletes are versioned too, so the
engine remembers (for `index.gc_deletes`) that an older upsert must not bring the document back.
"""
from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Iterator

import orjson

from derived.change import Change, DeadLetter, Version
from derived.shape import shape, shaped_field
from derived.sinks import visibility_marks
from derived.sinks.store_errors import StoreUnavailable
from derived.sinks.protocol import SinkResult
from derived.sinks.retry import pauses, retried
from derived.sinks.search.definition import with_gc_deletes
from derived.sinks.search.engines import Engine

RETRYABLE = {429, 500, 502, 503, 504}
# A bulk request holds at most `chunk` writes and about this many bytes (wide documents): the
# engines' guidance is requests of 5-15 MB; theirs refuse one above http.max_content_length (100 MB).
REQUEST_BYTES = 10 << 20
PAUSED = "-1"   # refresh_interval of an index whose refreshes are paused
_TIME_UNITS = {"nanos": 1e-9, "micros": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
log = logging.getLogger("cdckit.search")


def refreshed_within(interval: str | None, seconds: float) -> bool:
    """Whether an index refreshed every `interval` (the engine's time value; None: its default,
    1 s) is meant to be searched within `seconds` of a write. A longer interval, -1 (paused) or
    one not understood: the user chose throughput over freshness, or something else to decide."""
    if interval is None:
        return True
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(nanos|micros|ms|s|m|h|d)\s*", str(interval).lower())
    return match is not None and float(match[1]) * _TIME_UNITS[match[2]] <= seconds


@dataclass
class SearchTable:
    alias: str
    columns: list[str] | None = None
    rename: dict[str, str] = field(default_factory=dict)
    computed: dict[str, Any] = field(default_factory=dict)   # field -> spec (derived/transforms.py)
    remove: tuple[str, ...] = ()                              # fields this store leaves out
    # The index definition {"settings", "mappings"} `prepare` creates a first generation with; built
    # on the driver from the catalog (pipelines/apply/stores.py), None on executors.
    definition: dict[str, Any] | None = None
    refresh_interval: str | None = None   # the configured one (None: the engine's default)


class SearchSink:
    def __init__(self, engine: Engine, chunk: int = 5000, retries: int = 5, max_document_bytes: int | None = None,
                 require_alias: bool = True, gc_deletes_s: int | None = None):
        self.engine, self.chunk, self.retries = engine, chunk, retries
        self.gc_deletes_s = gc_deletes_s
        self.max_document_bytes = max_document_bytes
        # Live writes go through the alias and must never auto-create an index in its place (after
        # the engine lost its data, that index would block the rebuild's alias).
        self.require_alias = require_alias

    def target(self, table: SearchTable) -> str:
        return table.alias  # an alias for the live store; a concrete index for a rebuild's generation

    def mark(self, prefix: str, label: str, definition: dict[str, Any] | None = None) -> None:
        from derived.sinks import markers

        markers.mark_search(self.engine, prefix, definition)

    def marked(self, prefix: str) -> bool:
        from derived.sinks import markers

        return not markers.missing(prefix, self.engine, None)

    def holds(self, table: SearchTable) -> bool:
        return self.engine.alias_exists(table.alias)

    def count(self, table: SearchTable, exact: bool = False) -> int | None:
        """The documents behind the alias (exact once refreshed: `exact` refreshes first)."""
        if not self.holds(table):
            return None
        if exact:
            self.engine.refresh(table.alias)
        return self.engine.count(table.alias)

    def prepare(self, table: SearchTable) -> None:
        """A first generation `<alias>_v1` behind the alias, unless the alias exists already."""
        if self.engine.alias_exists(table.alias):
            return
        index = f"{table.alias}_v1"
        try:
            self.engine.create_index(index, with_gc_deletes(table.definition, self.gc_deletes_s))
        except Exception as exc:  # noqa: BLE001 - exists already (e.g. a crash between the two calls)
            if "already_exists" not in str(exc) and "already exists" not in str(exc):
                raise
        self.engine.point_alias(table.alias, index, [])

    def prepare_visible(self, prefix: str, definition: dict[str, Any] | None = None) -> None:
        visibility_marks.ensure_search_index(self.engine, prefix, definition)

    def make_readable(self, tables: list[SearchTable]) -> None:
        """One refresh over every table's index (a comma list: each alias must exist)."""
        if tables:
            self.engine.refresh(",".join(sorted({t.alias for t in tables})))

    def publish_visible(self, prefix: str, position: int, tables: list[SearchTable]) -> None:
        """The tables' indexes refreshed, then the position's document."""
        self.make_readable(tables)
        visibility_marks.publish_search(self.engine, prefix, position, time.time())

    def visible(self, prefix: str) -> int:
        doc = self.engine.mget(visibility_marks.search_index(prefix), [visibility_marks.SEARCH_DOC]).get(
            visibility_marks.SEARCH_DOC)
        return int(doc["lsn"]) if doc else 0

    def begin_load(self, table: SearchTable) -> None:
        """A bulk load nobody searches yet: the engine stops refreshing the index (each refresh
        writes a small segment that merges then rewrite) until end_load."""
        self.engine.put_settings(table.alias, {"index": {"refresh_interval": PAUSED}})

    def end_load(self, table: SearchTable) -> None:
        """The table's configured refresh interval again (None: the engine's default) and a
        refresh, so what was loaded is searchable."""
        self.engine.put_settings(table.alias, {"index": {"refresh_interval": table.refresh_interval}})
        self.engine.refresh(table.alias)

    def _lines(self, ch: Change, table: SearchTable, kept: dict[str, Any]) -> list[bytes]:
        """The change's bulk lines, serialised once (a retry sends them again as they are)."""
        meta = {"_index": self.target(table), "_id": ch.doc_id, "version": ch.version.external(),
                "version_type": "external_gte"}
        if ch.op == "delete":
            return [orjson.dumps({"delete": meta})]
        if self.require_alias:
            meta["require_alias"] = True
        return [orjson.dumps({"index": meta}), orjson.dumps({**kept, **shape(ch.row, table)}, default=str)]

    def apply(self, changes: Iterable[Change], tables: dict[str, SearchTable]) -> SinkResult:
        stats = SinkResult()
        if any(ch.tombstone for ch in changes):
            changes = self._tombstone_deletes(changes, tables, stats)
        kept = self._stored_unavailable(changes, tables)
        for request in bulk_requests(self._writes(changes, tables, kept, stats), self.chunk, REQUEST_BYTES):
            self._apply_chunk(request, tables, stats)
        return stats

    def _writes(self, changes: list[Change], tables: dict[str, SearchTable],
                kept: dict[tuple[str, str], dict[str, Any]], stats: SinkResult) -> Iterator[tuple[Change, list[bytes]]]:
        """Each change with its bulk lines, serialised as the requests are cut (the memory is one
        request's, not the batch's documents); an oversized document is refused here."""
        for ch in changes:
            lines = self._lines(ch, tables[ch.table], kept.get((ch.table, ch.doc_id), {}))
            if self._fits(ch, lines, stats):
                yield ch, lines

    def _read(self, call, *args):
        """A read the writes depend on, retried like them: an engine that is restarting is an
        outage (StoreUnavailable: the job pauses and re-runs the batch), not a failed batch."""
        # Any exception: connection errors, timeouts, 5xx of either client.
        return retried(call, *args, retries=self.retries, retry_on=(Exception,), cap=8.0,
                       give_up=lambda exc: StoreUnavailable(f"search: {type(exc).__name__}: {exc}"))

    def _tombstone_deletes(self, changes: list[Change], tables: dict[str, SearchTable], stats: SinkResult
                           ) -> list[Change]:
        """A tombstone-only delete (derived/reduce.py: settle_tombstones) becomes a versioned delete
        at the stored document's version: external_gte accepts it, and a redelivered copy of that
        very change again (an equal version) while anything older stays refused."""
        by_table: dict[str, list[Change]] = {}
        for ch in changes:
            if ch.tombstone:
                by_table.setdefault(ch.table, []).append(ch)
        held: dict[tuple[str, str], int] = {}
        for name, group in by_table.items():
            found = self._read(self.engine.versions, self.target(tables[name]), [ch.doc_id for ch in group])
            held.update({(name, doc_id): v for doc_id, v in found.items()})
        out = []
        for ch in changes:
            if not ch.tombstone:
                out.append(ch)
                continue
            stored = held.get((ch.table, ch.doc_id))
            if stored is None:
                stats.stale += 1
                continue
            out.append(replace(ch, version=Version(stored >> 1, stored & 1, 0)))
        return out

    def _check_squatters(self, pending: list[Change], items: list[dict[str, Any]],
                         tables: dict[str, SearchTable]) -> None:
        """A bulk delete through a missing alias makes the engine create a plain index of that name
        (deletes cannot require an alias). It holds nothing but delete markers: remove it, and stop."""
        squatted = {tables[ch.table].alias for ch, item in zip(pending, items)
                    if next(iter(item.values())).get("_index") == tables[ch.table].alias}
        for alias in squatted:
            if not self.engine.alias_exists(alias) and self.engine.index_exists(alias):
                self.engine.delete_index(alias)
        if squatted:
            raise StoreUnavailable(f"search: alias {', '.join(sorted(squatted))} does not exist (the engine lost its "
                                   "data?); run `cdckit rebuild search`")

    def _fits(self, ch: Change, lines: list[bytes], stats: SinkResult) -> bool:
        """An oversized document would fail its whole bulk request: refuse it alone, up front."""
        if not self.max_document_bytes or ch.op != "upsert":
            return True
        size = len(lines[1])
        if size <= self.max_document_bytes:
            return True
        stats.dead.append(DeadLetter(ch.position, None, None, "apply",
                                     f"document {ch.doc_id!r} is {size:,} bytes, above "
                                     f"search.max_document_bytes ({self.max_document_bytes:,})", {"store": "search"}))
        return False

    def _apply_chunk(self, pending: list[tuple[Change, list[bytes]]], tables: dict[str, SearchTable],
                     stats: SinkResult) -> None:
        waits = pauses(self.retries, 0.2, 8.0)
        while True:
            try:
                result = self.engine.bulk([line for _, lines in pending for line in lines])
            except Exception as exc:  # noqa: BLE001 - connection errors, timeouts, 429/5xx on the request
                failure: Exception | None = exc
                retry = pending
            else:
                failure, retry = None, []
                if self.require_alias:
                    self._check_squatters([ch for ch, _ in pending], result["items"], tables)
                for (ch, lines), item in zip(pending, result["items"]):
                    outcome = next(iter(item.values()))
                    status = outcome.get("status", 500)
                    if status == 404 and _error_type(outcome) == "index_not_found_exception":
                        raise StoreUnavailable(f"search: index {outcome.get('_index')} does not exist (the engine "
                                               "lost its data?); run `cdckit rebuild search`")
                    if status < 300 or (status == 404 and ch.op == "delete"):
                        stats.applied += 1
                    elif status == 409:
                        stats.stale += 1
                    elif status in RETRYABLE:
                        retry.append((ch, lines))
                    else:
                        stats.dead.append(DeadLetter(ch.position, None, None, "apply",
                                                     f"search rejected document {ch.doc_id!r}: "
                                                     f"{_reason(outcome)}", {"store": "search"}))
                        warn_refusal(ch.table, tables[ch.table], outcome)
            if not retry:
                return
            pending = retry
            pause = next(waits, None)
            if pause is None:
                break
            time.sleep(pause)
        raise StoreUnavailable(f"search: {len(pending)} writes still failing after {self.retries} retries"
                               + (f": {failure}" if failure else ""))

    def _stored_unavailable(self, changes: list[Change], tables: dict[str, SearchTable]
                            ) -> dict[tuple[str, str], dict[str, Any]]:
        """Unchanged TOAST columns come without a value: the stored document's fields for them."""
        by_table: dict[str, list[Change]] = {}
        for ch in changes:
            if ch.op == "upsert" and ch.unavailable:
                by_table.setdefault(ch.table, []).append(ch)
        kept: dict[tuple[str, str], dict[str, Any]] = {}
        for name, group in by_table.items():
            t = tables[name]
            stored = self._read(self.engine.mget, self.target(t), [ch.doc_id for ch in group])
            for ch in group:
                old = stored.get(ch.doc_id, {})
                fields = [f for f in (shaped_field(c, t) for c in ch.unavailable) if f is not None]
                kept[(name, ch.doc_id)] = {f: old[f] for f in fields if f in old}
        return kept

    def truncate(self, change: Change, table: SearchTable) -> int:
        """Versioned deletes of every document not written after the truncate (a full scroll: the
        newer documents may be anywhere). The deletes carry the version just below the cut's: a
        document written at the cut's own external version after the scroll (later in the truncating
        transaction, or a row a re-snapshot read again) refuses them, while everything older accepts.
        Idempotent, so retried as a whole like a read."""
        return self._read(self._truncate_once, change, table)

    def _truncate_once(self, change: Change, table: SearchTable) -> int:
        cut = change.version.external()
        self.engine.refresh(self.target(table))  # the scroll must see documents indexed just before
        older = [doc_id for doc_id, version in self.engine.scan_versions(self.target(table)) if version < cut]
        for start in range(0, len(older), self.chunk):
            ops = [{"delete": {"_index": self.target(table), "_id": i, "version": cut - 1,
                               "version_type": "external_gte"}} for i in older[start:start + self.chunk]]
            self.engine.bulk(ops)
        if older:
            self.engine.refresh(self.target(table))
        return len(older)


def bulk_requests(writes: Iterable[tuple[Change, list[bytes]]], most: int, most_bytes: int
                  ) -> Iterable[list[tuple[Change, list[bytes]]]]:
    """The writes in bulk requests of at most `most` writes and, past the first, `most_bytes`."""
    request: list[tuple[Change, list[bytes]]] = []
    size = 0
    for write in writes:
        n = sum(len(line) + 1 for line in write[1])
        if request and (len(request) >= most or size + n > most_bytes):
            yield request
            request, size = [], 0
        request.append(write)
        size += n
    if request:
        yield request


# The field a mapping refusal names: "mapper [doc.a.b] cannot be changed from type [text] to [double]",
# "object mapping for [doc.p] tried to parse field [p] as object", "failed to parse field [doc.r] of type
# [text]", "immense term in field=\"doc._value\"".
_REFUSED_FIELD = [re.compile(p) for p in (r"mapper \[([^\]]+)\]", r"object mapping for \[([^\]]+)\]",
                                          r"failed to parse field \[([^\]]+)\]", r'in field="([^"]+)"')]
_warned: set[tuple[str, str]] = set()   # (table, field) already named in this process


def refused_path(outcome: dict[str, Any]) -> str | None:
    """The document path a refused write's error names, if it names one."""
    err = outcome.get("error")
    if not isinstance(err, dict):
        return None
    texts = [str(err.get("reason") or "")]
    cause = err.get("caused_by")
    if isinstance(cause, dict):
        texts.append(str(cause.get("reason") or ""))
    for text in texts:
        for pattern in _REFUSED_FIELD:
            found = pattern.search(text)
            if found:
                return found.group(1)
    return None


def warn_refusal(name: str, table: SearchTable, outcome: dict[str, Any]) -> None:
    """A warning naming the table, the column and the path, at the first document the engine refuses
    for that field (once per process): under `json: object` a JSON path is typed by the first value
    the index sees, and every later document whose value there differs is refused the same way."""
    path = refused_path(outcome)
    if path is None:
        return
    top = path.split(".", 1)[0]
    if (name, top) in _warned:
        return
    _warned.add((name, top))
    column = next((c for c, f in table.rename.items() if f == top), top)
    err = outcome.get("error") or {}
    cause = err.get("caused_by") if isinstance(err, dict) else None
    detail = _reason(outcome) + (f" ({cause.get('reason')})" if isinstance(cause, dict) and cause.get("reason") else "")
    log.warning("search refuses documents of %s at column %s, path %s: %s. Each such document goes to the dead-"
                "letter topic. A json column under `search: {json: object}` types each path by the first value "
                "the index saw; `json: flattened` (the default) takes any JSON (docs/documents.md: Index definitions)",
                name, column, path, detail[:500])


def _error_type(outcome: dict[str, Any]) -> str | None:
    err = outcome.get("error")
    return err.get("type") if isinstance(err, dict) else None


def _reason(outcome: dict[str, Any]) -> str:
    err = outcome.get("error")
    if isinstance(err, dict):
        return f"{err.get('type')}: {err.get('reason')}"
    return str(err or outcome)
