"""Replay rate of `cdckit rebuild` into a fresh Redis generation and a fresh index, side by side
with the search engine's raw bulk rate for the same documents, in the same run.

    .venv/bin/python benchmarks/rebuild_replay.py [--events 1000000] [--keys 200000] [--partitions 2]

Targets (issue #5): at least 60k events/s into Redis; into the index at least 0.8x the raw bulk rate
(plain unversioned `index` bulk requests of the same documents, at the best of several bulk sizes).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (bench_stack, index_documents, raw_bulk_sweep, scratch_dir,  # noqa: E402
                               synthetic_topic, write_result)


def config_for(settings, topic: str, tmp: Path, bulk_chunk: int = 2000):
    from pipelines.config import parse_config

    prefix, table = topic.split(".", 1)
    return parse_config({
        "topic_prefix": prefix, "metrics_port": 0,
        "postgres": {"host": "127.0.0.1", "port": settings.ports["postgres"], "database": "cdckit", "user": "postgres"},
        "kafka": {"bootstrap_servers": settings.bootstrap_servers},
        "connect": {"url": settings.connect_url},
        "tables": [{"name": table, "index": f"b{uuid.uuid4().hex[:8]}", "redis_key": "bench:{id}"}],
        "search": {"kind": "opensearch", "url": settings.search_url, "index_settings": {"number_of_replicas": 0}, "bulk_chunk": bulk_chunk},
        "redis": {"url": settings.redis_url.rsplit("/", 1)[0] + "/3", "rebuild_db": 4},
        "spark": {"checkpoint_dir": str(tmp / uuid.uuid4().hex), "master": "local[2]"},
    })


def rebuild_once(spark, config, store: str) -> dict:
    from pipelines.rebuild import phases as rebuild
    plan = rebuild.make_plan(config, store, None)
    t0 = time.perf_counter()
    state = rebuild.run(spark, config, plan)
    total = time.perf_counter() - t0
    bulk = state.summary["bulk"]
    return {"events": bulk["records"], "keys_written": bulk["survivors"], "bulk_seconds": bulk["seconds"],
            "total_seconds": round(total, 1), "events_per_s": round(bulk["records"] / bulk["seconds"]),
            "keys_per_s": round(bulk["survivors"] / bulk["seconds"]),
            "task_seconds": {k: bulk[k] for k in ("read_seconds", "fold_seconds", "apply_seconds")}}


def drop_generation(settings, config) -> None:
    """osmem-server slows down as it holds more documents: the raw runs get the engine in the state
    the rebuild found it in (its generation dropped)."""
    from opensearchpy import OpenSearch

    client = OpenSearch(settings.search_url, timeout=120)
    alias = config.tables[0].index
    for index in client.indices.get_alias(name=alias):
        client.indices.delete(index=index)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--search-events", type=int, default=300_000, help="a smaller topic for the slower index")
    ap.add_argument("--search-keys", type=int, default=60_000)
    ap.add_argument("--bulk-chunk", type=int, default=1000,
                    help="search.bulk_chunk of the rebuild (osmem-server is fastest at 1,000; see the raw sweep)")
    ap.add_argument("--raw-chunks", default="1000,2000,5000", help="bulk sizes of the raw runs; the best one counts")
    args = ap.parse_args()
    from pipelines.spark.session import spark_session

    tmp = scratch_dir("cdckit-bench-")
    with bench_stack() as s:
        t0 = time.perf_counter()
        topic = synthetic_topic(s.bootstrap_servers, args.events, args.keys, args.partitions)
        print(f"produced {args.events:,} events ({args.keys:,} keys) in {time.perf_counter() - t0:.1f} s", flush=True)
        config = config_for(s, topic, tmp)
        spark = spark_session(config)
        cache = rebuild_once(spark, config, "cache")
        print(f"cache rebuild: {json.dumps(cache)}", flush=True)
        search_topic = synthetic_topic(s.bootstrap_servers, args.search_events, args.search_keys, args.partitions)
        search_config = config_for(s, search_topic, tmp, args.bulk_chunk)
        search = rebuild_once(spark, search_config, "search")
        search["bulk_chunk"] = args.bulk_chunk
        print(f"search rebuild: {json.dumps(search)}", flush=True)
        # The documents the rebuild wrote, read back from its generation: the raw runs send exactly
        # these (values change what the engine spends per document: synthetic look-alikes indexed
        # ~10% faster than the real survivors).
        docs = index_documents(s.search_url, search_config.tables[0].index)
        assert len(docs) == search["keys_written"], (len(docs), search["keys_written"])
        drop_generation(s, search_config)
        # the engine at its best bulk size: the strict baseline
        raw, sweep = raw_bulk_sweep(s.search_url, docs, [int(c) for c in args.raw_chunks.split(",")])
        spark.stop()
    result = {
        "cache": cache, "search": search, "search_raw_bulk": raw, "search_raw_sweep": sweep,
        "search_vs_raw": round(search["keys_per_s"] / raw["docs_per_s"], 2),
        "targets": {"cache_events_per_s": 60_000, "search_vs_raw": 0.8},
    }
    result["met"] = {"cache": cache["events_per_s"] >= 60_000, "search": result["search_vs_raw"] >= 0.8}
    print(json.dumps(result, indent=2))
    write_result("rebuild_replay", result)


if __name__ == "__main__":
    main()
