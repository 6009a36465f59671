"""Raw bulk rate of the local stack's two search engines, in one run: a real OpenSearch node (the
default) and osmem-server (the light option), the same documents, plain and externally versioned
`index` bulk requests (orjson bodies, one client).

    .venv/bin/python benchmarks/search_engines.py [--docs 100000] [--chunk 1000]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import BENCH_PORTS, ROOT, write_result  # noqa: E402


def documents(n: int) -> list[dict]:
    return [{"id": k, "name": f"customer {k} ünïcødé", "email": f"c{k}@example.com", "balance": f"{k}.25",
             "tags": [k % 7, k % 11], "updated_at": "2026-11-22T10:00:00.000000Z", "seq": k} for k in range(n)]


def bulk_rate(url: str, index: str, docs: list[dict], chunk: int, versioned: bool) -> float:
    import orjson
    from opensearchpy import OpenSearch

    client = OpenSearch(url, timeout=120)
    client.indices.create(index=index, body={"settings": {"number_of_replicas": 0}})
    started = time.perf_counter()
    for start in range(0, len(docs), chunk):
        lines = []
        for d in docs[start:start + chunk]:
            meta = {"_index": index, "_id": str(d["id"])}
            if versioned:
                meta.update(version=1000 + d["id"], version_type="external_gte")
            lines += [orjson.dumps({"index": meta}), orjson.dumps(d)]
        result = client.bulk(body=b"\n".join(lines) + b"\n")
        assert not result.get("errors"), "bulk items failed"
    client.indices.refresh(index=index)
    seconds = time.perf_counter() - started
    assert client.count(index=index)["count"] == len(docs)
    client.indices.delete(index=index)
    return len(docs) / seconds


def main() -> None:
    from pipelines.devstack import processes
    from pipelines.devstack.search_servers import SEARCH_ENGINES
    from pipelines.devstack.settings import StackSettings

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--chunk", type=int, default=1000)
    args = ap.parse_args()
    docs = documents(args.docs)
    result: dict = {"docs": args.docs, "chunk": args.chunk, "engines": {}}
    for engine in SEARCH_ENGINES:
        settings = StackSettings(state_dir=ROOT / ".devstack-bench" / f"search-{engine}", ports=dict(BENCH_PORTS),
                                 search_engine=engine)
        server = SEARCH_ENGINES[engine](settings)
        server.start()
        try:
            if not processes.wait_until(server.healthy, 120):
                raise SystemExit(f"{engine} did not start: {processes.log_tail(server.log)}")
            warm = documents(5000)
            bulk_rate(settings.search_url, "warmup", warm, args.chunk, versioned=False)
            rates = {kind: round(bulk_rate(settings.search_url, f"bench-{kind}", docs, args.chunk, kind == "versioned"))
                     for kind in ("plain", "versioned")}
        finally:
            server.stop()
        result["engines"][engine] = {"version": server.version(), **{f"{k}_docs_per_s": v for k, v in rates.items()}}
        print(f"{engine:<11} {server.version():<42} plain {rates['plain']:>8,} docs/s   "
              f"versioned {rates['versioned']:>8,} docs/s", flush=True)
    os_, osmem = result["engines"]["opensearch"], result["engines"]["osmem"]
    result["opensearch_vs_osmem"] = round(os_["versioned_docs_per_s"] / osmem["versioned_docs_per_s"], 2)
    print(f"OpenSearch / osmem (versioned): {result['opensearch_vs_osmem']}x")
    write_result("search_engines", result)


if __name__ == "__main__":
    main()
