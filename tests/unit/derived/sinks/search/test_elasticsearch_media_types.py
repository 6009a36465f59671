"""elasticsearch-py 9 sends `compatible-with=9` media types, which an Elasticsearch 8.x server
refuses (and OpenSearch too): the engine's transport node sends plain JSON, which both majors accept."""
from __future__ import annotations

from elastic_transport import ApiResponseMeta, HttpHeaders, Urllib3HttpNode
from elastic_transport._node._base import NodeApiResponse

from derived.sinks.search.engines import ElasticsearchEngine


def test_requests_carry_plain_json_media_types(monkeypatch):
    sent, targets = [], []

    def perform_request(self, method, target, body=None, headers=None, request_timeout=None):
        sent.append(dict(headers))
        targets.append(target)
        meta = ApiResponseMeta(status=200, http_version="1.1", duration=0.0, node=self.config,
                               headers=HttpHeaders({"content-type": "application/json"}))
        return NodeApiResponse(meta, b'{"took": 1, "errors": false, "items": []}')

    monkeypatch.setattr(Urllib3HttpNode, "perform_request", perform_request)
    engine = ElasticsearchEngine("http://127.0.0.1:9")
    assert engine.bulk([{"index": {"_index": "customers", "_id": "1"}}, {"name": "a"}])["errors"] is False
    (headers,) = sent
    assert headers["accept"] == "application/json"
    assert headers["content-type"] == "application/x-ndjson"
    assert not any("compatible-with" in value for value in headers.values())
    # The answer is asked for what the sink reads of it only (engines.BULK_FILTER).
    assert targets == ["/_bulk?filter_path=items.*.status,items.*.error,items.*._index"]
