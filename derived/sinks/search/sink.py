"""Search index sink: versioned bulk writes through an alias, for Elasticsearch and OpenSearch.

External versions (`external_gte`) make every write idempotent and order-independent: a 409 is
"the index already holds something newer", not an error. Deletes are versioned too, so the
engine remembers (for `index.gc_deletes`) that an older upsert must not bring the document back.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Iterator, Protocol

import orjson

from derived.change import Change, DeadLetter, Version
from derived.sinks.errors import StoreUnavailable
from derived.shape import shape, shaped_field

RETRYABLE = {429, 500, 502, 503, 504}


class Engine(Protocol):
    """The few calls cdckit makes; one adapter per client library."""

    def bulk(self, operations: list[dict[str, Any]]) -> dict[str, Any]: ...
    def alias_exists(self, alias: str) -> bool: ...
    def create_index(self, index: str, mappings: dict[str, Any] | None, gc_deletes_s: int | None = None) -> None: ...
    def point_alias(self, alias: str, index: str, remove_from: list[str]) -> None: ...
    def alias_targets(self, alias: str) -> list[str]: ...
    def mget(self, index: str, ids: list[str]) -> dict[str, dict[str, Any]]: ...
    def versions(self, index: str, ids: list[str]) -> dict[str, int]: ...
    def search(self, index: str, body: dict[str, Any]) -> dict[str, Any]: ...
    def count(self, index: str) -> int: ...
    def delete_index(self, index: str) -> None: ...
    def index_exists(self, index: str) -> bool: ...
    def scan_versions(self, index: str, page: int = 5000) -> Iterator[tuple[str, int]]: ...
    def refresh(self, index: str) -> None: ...


class _Common:
    client: Any

    def alias_exists(self, alias: str) -> bool:
        return bool(self.client.indices.exists_alias(name=alias))

    def alias_targets(self, alias: str) -> list[str]:
        if not self.alias_exists(alias):
            return []
        return sorted(self.client.indices.get_alias(name=alias))

    def point_alias(self, alias: str, index: str, remove_from: list[str]) -> None:
        actions = [{"remove": {"index": old, "alias": alias}} for old in remove_from]
        actions.append({"add": {"index": index, "alias": alias, "is_write_index": True}})
        self._aliases(actions)

    def mget(self, index: str, ids: list[str]) -> dict[str, dict[str, Any]]:
        body = self._mget(index, ids)
        return {d["_id"]: d["_source"] for d in body["docs"] if d.get("found")}

    def versions(self, index: str, ids: list[str]) -> dict[str, int]:
        """The stored version of each of these documents that exists."""
        body = self._mget(index, ids)
        return {d["_id"]: int(d["_version"]) for d in body["docs"] if d.get("found")}

    def count(self, index: str) -> int:
        return int(self.client.count(index=index)["count"])

    def scan_ids(self, index: str, page: int = 5000):
        """Every document id, by scroll (constant memory)."""
        yield from (i for i, _ in self.scan_versions(index, page))

    def scan_versions(self, index: str, page: int = 5000):
        """Every (document id, version), by scroll (constant memory)."""
        body = self._scroll_start(index, page)
        try:
            while body["hits"]["hits"]:
                yield from ((h["_id"], int(h.get("_version", 0))) for h in body["hits"]["hits"])
                body = self._scroll_next(body["_scroll_id"])
        finally:
            try:
                self.client.clear_scroll(scroll_id=body.get("_scroll_id"))
            except Exception:  # noqa: BLE001 - best effort; the scroll expires anyway
                pass

    def delete_index(self, index: str) -> None:
        self.client.indices.delete(index=index)

    def index_exists(self, index: str) -> bool:
        return bool(self.client.indices.exists(index=index))

    def refresh(self, index: str) -> None:
        self.client.indices.refresh(index=index)


class OpenSearchEngine(_Common):
    def __init__(self, url: str, http_auth: tuple[str, str] | None = None, api_key: str | None = None,
                 verify_certs: bool = True, ca_certs: str | None = None, timeout: float = 30):
        from opensearchpy import OpenSearch

        headers = {"Authorization": f"ApiKey {api_key}"} if api_key else None
        self.client = OpenSearch(url, http_auth=http_auth, headers=headers, verify_certs=verify_certs,
                                 ca_certs=ca_certs, timeout=timeout, max_retries=0)

    def bulk(self, operations):
        return self.client.bulk(body=_ndjson(operations))

    def create_index(self, index, mappings, gc_deletes_s=None):
        body: dict[str, Any] = {"settings": _index_settings(gc_deletes_s)}
        if mappings:
            body["mappings"] = {"properties": mappings}
        self.client.indices.create(index=index, body=body)

    def _aliases(self, actions):
        self.client.indices.update_aliases(body={"actions": actions})

    def _mget(self, index, ids):
        return self.client.mget(index=index, body={"ids": ids})

    def search(self, index, body):
        return self.client.search(index=index, body=body)

    def _scroll_start(self, index, page):
        return self.client.search(index=index, scroll="2m", body={"size": page, "_source": False, "version": True,
                                                                  "query": {"match_all": {}}})

    def _scroll_next(self, scroll_id):
        return self.client.scroll(scroll_id=scroll_id, scroll="2m")


class ElasticsearchEngine(_Common):
    def __init__(self, url: str, http_auth: tuple[str, str] | None = None, api_key: str | None = None,
                 verify_certs: bool = True, ca_certs: str | None = None, timeout: float = 30):
        from elasticsearch import Elasticsearch

        self.client = Elasticsearch(url, basic_auth=http_auth, api_key=api_key, verify_certs=verify_certs,
                                    ca_certs=ca_certs, request_timeout=timeout, max_retries=0,
                                    node_class=_plain_json_node())

    def bulk(self, operations):
        return self.client.bulk(operations=_ndjson(operations)).body

    def create_index(self, index, mappings, gc_deletes_s=None):
        self.client.indices.create(index=index, settings=_index_settings(gc_deletes_s),
                                   mappings={"properties": mappings} if mappings else None)

    def _aliases(self, actions):
        self.client.indices.update_aliases(actions=actions)

    def _mget(self, index, ids):
        return self.client.mget(index=index, ids=ids).body

    def search(self, index, body):
        return self.client.search(index=index, **body).body

    def _scroll_start(self, index, page):
        return self.client.search(index=index, scroll="2m", size=page, source=False, version=True,
                                  query={"match_all": {}}).body

    def _scroll_next(self, scroll_id):
        return self.client.scroll(scroll_id=scroll_id, scroll="2m").body


def _index_settings(gc_deletes_s: int | None) -> dict[str, Any]:
    settings: dict[str, Any] = {"number_of_replicas": 0}
    if gc_deletes_s:
        settings["index.gc_deletes"] = f"{gc_deletes_s}s"
    return settings


def _ndjson(operations: list[dict[str, Any]]) -> bytes:
    """The bulk body serialised with orjson: the client libraries' stdlib json costs more CPU
    than the engine spends indexing a small document."""
    return b"\n".join(orjson.dumps(op, default=str) for op in operations) + b"\n"


def _plain_json_node():
    """A transport node that sends plain JSON media types. elasticsearch-py always rewrites them to
    `application/vnd.elasticsearch+json; compatible-with=N`, which OpenSearch-API servers refuse;
    Elasticsearch 8/9 accept plain JSON too, so one client works against both (the product check
    is answered for servers that do not send Elasticsearch's product header)."""
    import re

    from elastic_transport import Urllib3HttpNode

    compat = re.compile(r"application/vnd\.elasticsearch\+([a-z\-]+); compatible-with=\d+")

    class PlainJsonNode(Urllib3HttpNode):
        def perform_request(self, method, target, body=None, headers=None, request_timeout=None):
            if headers:
                headers = headers.copy()
                for name in ("accept", "content-type"):
                    if name in headers:
                        headers[name] = compat.sub(r"application/\1", headers[name])
            response = super().perform_request(method, target, body=body, headers=headers,
                                               request_timeout=request_timeout)
            # The client refuses a server that does not say it is Elasticsearch (OpenSearch does not).
            if "x-elastic-product" not in response.meta.headers:
                response.meta.headers["X-Elastic-Product"] = "Elasticsearch"
            return response

    return PlainJsonNode


@dataclass
class SearchTable:
    alias: str
    columns: list[str] | None = None
    rename: dict[str, str] = field(default_factory=dict)
    mappings: dict[str, Any] | None = None


@dataclass
class SearchStats:
    applied: int = 0
    stale: int = 0
    dead: list[DeadLetter] = field(default_factory=list)


class SearchSink:
    def __init__(self, engine: Engine, chunk: int = 2000, retries: int = 5, max_document_bytes: int | None = None,
                 require_alias: bool = True, gc_deletes_s: int | None = None):
        self.engine, self.chunk, self.retries = engine, chunk, retries
        self.gc_deletes_s = gc_deletes_s
        self.max_document_bytes = max_document_bytes
        # Live writes go through the alias and must never auto-create an index in its place (after
        # the engine lost its data, that index would block the rebuild's alias).
        self.require_alias = require_alias

    def target(self, table: SearchTable) -> str:
        return table.alias  # an alias for the live store; a concrete index for a rebuild's generation

    def ensure_index(self, table: SearchTable) -> None:
        """A first generation `<alias>_v1` behind the alias, unless the alias exists already."""
        if self.engine.alias_exists(table.alias):
            return
        index = f"{table.alias}_v1"
        try:
            self.engine.create_index(index, table.mappings, self.gc_deletes_s)
        except Exception as exc:  # noqa: BLE001 - exists already (e.g. a crash between the two calls)
            if "already_exists" not in str(exc) and "already exists" not in str(exc):
                raise
        self.engine.point_alias(table.alias, index, [])

    def _op(self, ch: Change, table: SearchTable, kept: dict[str, Any]) -> list[dict[str, Any]]:
        meta = {"_index": self.target(table), "_id": ch.doc_id, "version": ch.version.external(),
                "version_type": "external_gte"}
        if ch.op == "delete":
            return [{"delete": meta}]
        if self.require_alias:
            meta["require_alias"] = True
        return [{"index": meta}, {**kept, **shape(ch.row, table)}]

    def apply(self, changes: Iterable[Change], tables: dict[str, SearchTable]) -> SearchStats:
        stats = SearchStats()
        changes = [ch for ch in changes if self._fits(ch, tables[ch.table], stats)]
        if any(ch.tombstone for ch in changes):
            changes = self._tombstone_deletes(changes, tables, stats)
        kept = self._stored_unavailable(changes, tables)
        for start in range(0, len(changes), self.chunk):
            self._apply_chunk(changes[start:start + self.chunk], tables, stats, kept)
        return stats

    def _read(self, call, *args):
        """A read the writes depend on, retried like them: an engine that is restarting is an
        outage (StoreUnavailable: the job pauses and re-runs the batch), not a failed batch."""
        delay = 0.2
        for attempt in range(self.retries + 1):
            try:
                return call(*args)
            except Exception as exc:  # noqa: BLE001 - connection errors, timeouts, 5xx of either client
                if attempt == self.retries:
                    raise StoreUnavailable(f"search: {type(exc).__name__}: {exc}") from exc
                time.sleep(delay)
                delay = min(delay * 2, 8.0)
        raise AssertionError("unreachable")

    def _tombstone_deletes(self, changes: list[Change], tables: dict[str, SearchTable], stats: SearchStats
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

    def _fits(self, ch: Change, table: SearchTable, stats: SearchStats) -> bool:
        """An oversized document would fail its whole bulk request: refuse it alone, up front."""
        if not self.max_document_bytes or ch.op != "upsert":
            return True
        size = len(orjson.dumps(shape(ch.row, table), default=str))
        if size <= self.max_document_bytes:
            return True
        stats.dead.append(DeadLetter(ch.position, None, None, "apply",
                                     f"document {ch.doc_id!r} is {size:,} bytes, above "
                                     f"search.max_document_bytes ({self.max_document_bytes:,})", {"store": "search"}))
        return False

    def _apply_chunk(self, pending: list[Change], tables: dict[str, SearchTable], stats: SearchStats,
                     kept: dict[tuple[str, str], dict[str, Any]]) -> None:
        delay = 0.2
        for attempt in range(self.retries + 1):
            ops = [op for ch in pending
                   for op in self._op(ch, tables[ch.table], kept.get((ch.table, ch.doc_id), {}))]
            try:
                result = self.engine.bulk(ops)
            except Exception as exc:  # noqa: BLE001 - connection errors, timeouts, 429/5xx on the request
                failure: Exception | None = exc
                retry = pending
            else:
                failure, retry = None, []
                if self.require_alias:
                    self._check_squatters(pending, result["items"], tables)
                for ch, item in zip(pending, result["items"]):
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
                        retry.append(ch)
                    else:
                        stats.dead.append(DeadLetter(ch.position, None, None, "apply",
                                                     f"search rejected document {ch.doc_id!r}: "
                                                     f"{_reason(outcome)}", {"store": "search"}))
            if not retry:
                return
            pending = retry
            if attempt < self.retries:
                time.sleep(delay)
                delay = min(delay * 2, 8.0)
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


def _error_type(outcome: dict[str, Any]) -> str | None:
    err = outcome.get("error")
    return err.get("type") if isinstance(err, dict) else None


def _reason(outcome: dict[str, Any]) -> str:
    err = outcome.get("error")
    if isinstance(err, dict):
        return f"{err.get('type')}: {err.get('reason')}"
    return str(err or outcome)
