"""Search engine adapters: the few calls cdckit makes, one adapter per client library
(opensearch-py, elasticsearch-py), both able to talk to either engine."""
from __future__ import annotations

from typing import Any, Iterator, Protocol

import orjson

# What a bulk answer is read for (derived/sinks/search/sink.py): each item's status, error and index.
# Every item has a status, so the items keep their places; the rest (_id, _version, result, _shards,
# _seq_no, ...) is two thirds of the answer, which the client parses: ~4 % of a bootstrap worker's CPU.
BULK_FILTER = "items.*.status,items.*.error,items.*._index"


class Engine(Protocol):
    """The few calls cdckit makes; one adapter per client library."""

    def bulk(self, operations: list[dict[str, Any] | bytes]) -> dict[str, Any]: ...
    def alias_exists(self, alias: str) -> bool: ...
    def create_index(self, index: str, definition: dict[str, Any] | None) -> None: ...
    def index_definition(self, index: str) -> dict[str, Any]: ...
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
    def put_mapping(self, index: str, properties: dict[str, Any]) -> None: ...
    def put_settings(self, index: str, settings: dict[str, Any]) -> None: ...


def create_index_if_missing(engine: Engine, index: str, definition: dict[str, Any] | None) -> None:
    """For cdckit's own small indices (store marker, visibility position); a concurrent creation wins."""
    if engine.index_exists(index):
        return
    try:
        engine.create_index(index, definition)
    except Exception as exc:  # noqa: BLE001 - created concurrently (either client library's error)
        if "already" not in str(exc):
            raise


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

    def index_definition(self, index: str) -> dict[str, Any]:
        """{"settings": ..., "mappings": ...} of an index, or of the one index behind an alias."""
        from derived.sinks.store_errors import GenerationError

        targets = self.alias_targets(index) or [index]
        if len(targets) > 1:
            raise GenerationError(f"alias {index} points to {len(targets)} indices ({', '.join(targets)}); "
                                  "cdckit expects one")
        target = targets[0]
        settings = self._get(self.client.indices.get_settings, target)
        mappings = self._get(self.client.indices.get_mapping, target)
        return {"settings": settings[target]["settings"], "mappings": mappings[target].get("mappings", {})}

    def index_exists(self, index: str) -> bool:
        return bool(self.client.indices.exists(index=index))

    def refresh(self, index: str) -> None:
        self.client.indices.refresh(index=index)


class OpenSearchEngine(_Common):
    def __init__(self, url: str, http_auth: tuple[str, str] | None = None, api_key: str | None = None,
                 verify_certs: bool = True, ca_certs: str | None = None, timeout: float = 30):
        from opensearchpy import OpenSearch

        headers = {"Authorization": f"ApiKey {api_key}"} if api_key else None
        options = dict(http_auth=http_auth, headers=headers, verify_certs=verify_certs, ca_certs=ca_certs,
                       timeout=timeout, max_retries=0)
        self.client = OpenSearch(url, **options)
        self._bulk_client = OpenSearch(url, serializer=_bulk_response_parser(), **options)

    def bulk(self, operations):
        return self._bulk_client.bulk(body=_ndjson(operations), filter_path=BULK_FILTER)

    def create_index(self, index, definition):
        body = {k: v for k, v in (definition or {}).items() if k in ("settings", "mappings") and v}
        self.client.indices.create(index=index, body=body or None)

    @staticmethod
    def _get(call, index):
        return call(index=index)

    def _aliases(self, actions):
        self.client.indices.update_aliases(body={"actions": actions})

    def put_mapping(self, index, properties):
        self.client.indices.put_mapping(index=index, body={"properties": properties})

    def put_settings(self, index, settings):
        self.client.indices.put_settings(index=index, body=settings)

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
        return self.client.bulk(operations=_ndjson(operations), filter_path=BULK_FILTER).body

    def create_index(self, index, definition):
        definition = definition or {}
        self.client.indices.create(index=index, settings=definition.get("settings") or None,
                                   mappings=definition.get("mappings") or None)

    @staticmethod
    def _get(call, index):
        return call(index=index).body

    def _aliases(self, actions):
        self.client.indices.update_aliases(actions=actions)

    def put_mapping(self, index, properties):
        self.client.indices.put_mapping(index=index, properties=properties)

    def put_settings(self, index, settings):
        self.client.indices.put_settings(index=index, settings=settings)

    def _mget(self, index, ids):
        return self.client.mget(index=index, ids=ids).body

    def search(self, index, body):
        return self.client.search(index=index, **body).body

    def _scroll_start(self, index, page):
        return self.client.search(index=index, scroll="2m", size=page, source=False, version=True,
                                  query={"match_all": {}}).body

    def _scroll_next(self, scroll_id):
        return self.client.scroll(scroll_id=scroll_id, scroll="2m").body


def _bulk_response_parser():
    """opensearch-py's JSON serializer parsing with orjson, for bulk responses only: parsed by the
    stdlib's, a response (an item per document) costs a tenth of a bootstrap worker's CPU. Not for
    responses holding documents: orjson reads an integer beyond 64 bits as a float."""
    from opensearchpy.exceptions import SerializationError
    from opensearchpy.serializer import JSONSerializer

    class BulkResponses(JSONSerializer):
        def loads(self, s: str) -> Any:
            try:
                return orjson.loads(s)
            except (orjson.JSONDecodeError, TypeError) as exc:
                raise SerializationError(s, exc)

    return BulkResponses()


def _ndjson(operations: list[dict[str, Any] | bytes]) -> bytes:
    """The bulk body serialised with orjson (the client libraries' stdlib json costs more CPU
    than the engine spends indexing a small document); a line given as bytes is serialised already."""
    return b"\n".join(op if type(op) is bytes else orjson.dumps(op, default=str) for op in operations) + b"\n"


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
