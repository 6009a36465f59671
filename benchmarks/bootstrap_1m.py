"""Bootstrap of a large table, one bench stack, one loaded table, one bootstrap per set of stores:
Debezium's snapshot into Kafka (the floor), time to synced for Redis alone, the index alone and
both, the search engine's raw bulk rate for the same documents, and peak memory per process role.

    .venv/bin/python benchmarks/bootstrap_1m.py [--rows 1000000] [--partitions 3]
                                                [--sinks-runs cache,search,both] [--warm-rows 300000]

The table (`public.bootstrap_1m`, 5 columns) is loaded once. Each run is a `cdckit bootstrap --once`
of its own (topic prefix, slot, publication, connector, checkpoint, index and Redis key prefix) with
`sinks` [cache], [search] or [search, cache]; its connector and replication slot are removed after
it (the next run gets the cores), and the stores are counted (every row there?). Before them, not
counted, a bootstrap of the table's first --warm-rows rows (its own table) into both stores: the
servers' JVMs compile their hot code then, not during the first measured run. Per run:
  snapshot_into_kafka_s  from the command's start until the table's topic holds every row
  synced_s               from the command's start until the bootstrap watermark is recorded (the
                         stores are consistent with the snapshot); exit_s: until the command exited
Raw bulk: the documents of the search-alone run (else of the both run), read back and sent again
as plain unversioned `index` bulk requests (orjson bodies, one client) into a fresh index with the
same mapping, at the best of 1,000 / 2,000 / 5,000 per request, with the run's index dropped first.

Targets (issue #40; #18's in brackets):
  each run's synced_s / its snapshot_into_kafka_s      Redis <= 1.1 (1.2), search and both <= 1.3
  (rows / search-alone synced_s) / raw bulk docs/s     (>= 0.8)
  both synced_s / max(redis synced_s, search synced_s) (<= 1.10)
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (ROOT, RssSampler, bench_stack, scratch_dir, drop_topics, index_definition,  # noqa: E402
                               index_documents, raw_bulk, raw_bulk_sweep, topics_named, unlink_keys,
                               write_result)

TABLE = "public.bootstrap_1m"   # one table for every run: its name does not depend on a run's prefix
WARM_TABLE = "public.bootstrap_warm"   # the warm-up run's (--warm-rows)
RUNS = {"cache": ["cache"], "search": ["search"], "both": ["search", "cache"]}
TARGETS = {"redis_vs_snapshot_max": 1.1, "search_vs_snapshot_max": 1.3, "both_vs_snapshot_max": 1.3,
           "search_vs_raw_min": 0.8, "both_vs_slowest_max": 1.10}


def parse_runs(text: str) -> list[str]:
    runs = [r.strip() for r in text.split(",") if r.strip()]
    if not runs or any(r not in RUNS for r in runs) or len(set(runs)) != len(runs):
        raise SystemExit(f"--sinks-runs: a comma-separated subset of {','.join(RUNS)}, got {text!r}")
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--sinks-runs", default="cache,search,both",
                    help="bootstraps to make, one after another over the same table: cache (sinks [cache]), "
                         "search (sinks [search]), both (sinks [search, cache])")
    ap.add_argument("--raw-chunks", default="1000,2000,5000", help="bulk sizes of the raw runs; the best one counts")
    ap.add_argument("--no-raw", action="store_true", help="skip the raw bulk runs (no search ratio)")
    ap.add_argument("--warm-rows", type=int, default=300_000,
                    help="rows of a bootstrap into both stores before the measured runs, not counted (0: none): "
                         "servers in service are warm; without it the first runs paid the JVMs' compiling (the "
                         "engine 60 CPU s for the search run's million documents, 37 s for the both run's after "
                         "it; Connect 55, 45, then 35 s for the same snapshot), so a run's figures depended on "
                         "its place")
    ap.add_argument("--warm-docs", type=int, default=300_000,
                    help="documents bulk-indexed into a scratch index before the runs (0: none): a search engine "
                         "in service is warm; a fresh JVM compiles its indexing code during the first load, "
                         "which doubled the search run's engine CPU")
    args = ap.parse_args()
    runs = parse_runs(args.sinks_runs)
    import psycopg

    tmp = scratch_dir("cdckit-bench-")
    by_run: dict[str, dict] = {}
    raw = sweep = None
    with bench_stack() as s, RssSampler(s) as sampler:
        dsn = dict(host="127.0.0.1", port=s.ports["postgres"], dbname="cdckit", user="postgres")
        with psycopg.connect(**dsn, autocommit=True) as conn:
            _drop_earlier_slots(conn)
            t0 = time.perf_counter()
            conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
            conn.execute(f"CREATE TABLE {TABLE} (id int PRIMARY KEY, name text, email text, balance numeric(12,2), "
                         f"updated_at timestamptz)")
            conn.execute(f"INSERT INTO {TABLE} SELECT g, 'customer ' || g, 'c' || g || '@example.com', g * 1.5, "
                         f"now() FROM generate_series(1, {args.rows}) g")
            conn.execute(f"VACUUM ANALYZE {TABLE}")
            if args.warm_rows:
                conn.execute(f"DROP TABLE IF EXISTS {WARM_TABLE}")
                conn.execute(f"CREATE TABLE {WARM_TABLE} (LIKE {TABLE} INCLUDING ALL)")
                conn.execute(f"INSERT INTO {WARM_TABLE} SELECT * FROM {TABLE} WHERE id <= {args.warm_rows}")
            print(f"loaded {args.rows:,} rows into {TABLE} in {time.perf_counter() - t0:.1f} s", flush=True)
        if args.warm_docs and any("search" in RUNS[r] for r in runs):
            warm = _warm_engine(s.search_url, args.warm_docs)
            print(f"search engine warmed: {warm['docs']:,} documents in {warm['seconds']} s", flush=True)
        raw_from = None if args.no_raw else "search" if "search" in runs else ("both" if "both" in runs else None)
        if args.warm_rows:
            warmed, prefix = _bootstrap(s, "both", args, tmp, sampler, table=WARM_TABLE,
                                        rows=min(args.warm_rows, args.rows), label="warm-up")
            _drop_stores(s, "both", prefix)
            print(f"warm-up (not counted): {warmed['stores']} in {warmed['synced_s']} s", flush=True)
        for run in runs:
            by_run[run], prefix = _bootstrap(s, run, args, tmp, sampler)
            if run == raw_from:
                raw, sweep = _raw_bulk(s, prefix, args.rows, [int(c) for c in args.raw_chunks.split(",")])
                by_run[run]["raw_bulk_source"] = True
            _drop_stores(s, run, prefix)
        with psycopg.connect(**dsn, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
            conn.execute(f"DROP TABLE IF EXISTS {WARM_TABLE}")
    memory = sampler.as_json()
    result = {"rows": args.rows, "partitions": args.partitions, "runs": runs, "table": TABLE,
              "warm_rows": min(args.warm_rows, args.rows), "warm_docs": args.warm_docs,
              "search_engine": s.search_engine, "by_run": by_run, "raw_bulk": raw, "raw_bulk_sweep": sweep,
              "memory": memory}
    result.update(_ratios(by_run, raw, args.rows))
    print()
    _print_summary(result)
    print()
    print(sampler.table())
    write_result("bootstrap_1m", result)


def _warm_engine(url: str, docs: int) -> dict:
    """Documents shaped like the table's rows into a scratch index, dropped after (raw_bulk)."""
    import orjson

    rows = [(str(i), orjson.dumps({"id": i, "name": f"customer {i}", "email": f"c{i}@example.com",
                                   "balance": str(i * 1.5), "updated_at": "2026-11-27T10:00:00Z"}))
            for i in range(1, docs + 1)]
    return raw_bulk(url, rows, chunk=2000)


def _bootstrap(s, run: str, args, tmp: Path, sampler: RssSampler, table: str = TABLE, rows: int | None = None,
               label: str | None = None) -> tuple[dict, str]:
    """One `cdckit bootstrap --once` of `table` (`rows` rows) with its own prefix, slot, publication,
    connector and checkpoint; its connector and slot are removed afterwards. (figures, prefix)"""
    import yaml

    from connectors.kafka.offsets import end_offsets
    from pipelines.config import parse_config

    prefix = f"b{uuid.uuid4().hex[:6]}"
    sinks, label, rows = RUNS[run], label or run, rows or args.rows
    ckpt = tmp / f"ckpt-{label}"
    config = {
        "topic_prefix": prefix, "metrics_port": 0, "sinks": sinks,
        "postgres": {"host": "127.0.0.1", "port": s.ports["postgres"], "database": "cdckit", "user": "postgres",
                     "sslmode": "disable", "slot": prefix, "publication": prefix},
        "kafka": {"bootstrap_servers": s.bootstrap_servers, "partitions": args.partitions},
        "connect": {"url": s.connect_url},
        "tables": [{"name": table, "index": prefix, "redis_key": f"{prefix}:{{id}}"}],
        "search": {"kind": "opensearch", "url": s.search_url, "index_settings": {"number_of_replicas": 0}},
        "redis": {"url": s.redis_url},
        "spark": {"checkpoint_dir": str(ckpt), "trigger": "1 second", "max_offsets_per_trigger": 150_000},
    }
    connector = parse_config(config).connector_name
    path = tmp / f"cdckit-{label}.yaml"
    path.write_text(yaml.safe_dump(config))
    topic = f"{prefix}.{table}"
    in_kafka: dict[str, float] = {}
    watching = threading.Event()

    def watch_topic(started: float) -> None:
        while not watching.wait(0.5):
            try:
                end = end_offsets({"bootstrap.servers": s.bootstrap_servers}, [topic]).get(topic, {})
            except Exception:  # noqa: BLE001 - topic not created yet
                end = {}
            if sum(int(o) for o in end.values()) >= rows:
                in_kafka["seconds"] = time.perf_counter() - started
                return

    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    log = tmp / f"bootstrap-{label}.log"
    print(f"[{label}] bootstrap --once, sinks {sinks}, prefix {prefix}, connector {connector}", flush=True)
    try:
        wall0, started = time.time(), time.perf_counter()
        watcher = threading.Thread(target=watch_topic, args=(started,), daemon=True)
        watcher.start()
        with open(log, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "bootstrap", "--once", "-c", str(path)],
                                    cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        sampler.add_root(proc.pid, "spark driver")
        try:
            with sampler.phase(label):
                code = proc.wait()
        finally:
            sampler.remove_root(proc.pid)
        exit_s = time.perf_counter() - started
        watching.set()
        watcher.join(5)
        if code != 0:
            print(log.read_text(errors="replace")[-4000:])
            raise SystemExit(f"[{label}] bootstrap failed (exit {code}); log: {log}")
        completed_at = _watermark_at(ckpt)
        synced_s = completed_at - wall0 if completed_at else exit_s
        snap = in_kafka.get("seconds")
        stores = _count_stores(s, sinks, prefix)
        complete = all(n == rows for n in stores.values())
        out = {"sinks": sinks, "prefix": prefix, "connector": connector,
               "snapshot_into_kafka_s": round(snap, 1) if snap else None,
               "snapshot_rows_per_s": round(rows / snap) if snap else None,
               "synced_s": round(synced_s, 1), "synced_from": "watermark" if completed_at else "exit",
               "exit_s": round(exit_s, 1), "rows_per_s": round(rows / synced_s),
               "stores": stores, "every_row": complete, "log": str(log)}
        print(f"[{label}] snapshot into Kafka {_s(snap)}, synced {synced_s:.1f} s ({rows / synced_s:,.0f} rows/s), "
              f"command exited at {exit_s:.1f} s; stores hold {json.dumps(stores)}"
              + ("" if complete else f"  <-- NOT every row ({rows:,})"), flush=True)
        return out, prefix
    finally:
        watching.set()
        _remove_connector(s, connector, prefix)


def _watermark_at(ckpt: Path) -> float | None:
    """When the bootstrap recorded its watermark (the state file's completed_at), else None."""
    try:
        from pipelines.state.bootstrap_state import read_state

        state = read_state(ckpt)
        return float(state.completed_at) if state and state.completed_at else None
    except Exception:  # noqa: BLE001 - the file's shape is the pipeline's to change
        return None


def _count_stores(s, sinks: list[str], prefix: str) -> dict[str, int]:
    """Redis: keys with the run's prefix (SCAN); search: _count on the run's alias (after a refresh)."""
    import redis
    import requests

    out = {}
    if "cache" in sinks:
        r = redis.Redis.from_url(s.redis_url)
        out["redis_keys"] = sum(1 for _ in r.scan_iter(match=f"{prefix}:*", count=10_000))
    if "search" in sinks:
        requests.post(f"{s.search_url}/{prefix}/_refresh", timeout=120)
        out["search_docs"] = requests.get(f"{s.search_url}/{prefix}/_count", timeout=120).json()["count"]
    return out


def _remove_connector(s, connector: str, slot: str) -> None:
    """DELETE the connector through Connect's REST API, then drop its replication slot (retried while
    the task lets go of it) and its publication."""
    import psycopg
    import requests

    try:
        resp = requests.delete(f"{s.connect_url}/connectors/{connector}", timeout=60)
        if resp.status_code not in (204, 404):
            print(f"  DELETE /connectors/{connector}: {resp.status_code} {resp.text[:200]}", flush=True)
    except requests.RequestException as exc:
        print(f"  DELETE /connectors/{connector} failed: {exc}", flush=True)
    with psycopg.connect(host="127.0.0.1", port=s.ports["postgres"], dbname="cdckit", user="postgres",
                         autocommit=True) as conn:
        for attempt in range(30):
            row = conn.execute("SELECT active, active_pid FROM pg_replication_slots WHERE slot_name = %s",
                               (slot,)).fetchone()
            if row is None:
                break
            try:
                conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
                break
            except psycopg.errors.ObjectInUse:
                time.sleep(1)
        else:
            print(f"  replication slot {slot} still active after 30 s: left in place", flush=True)
        conn.execute(f'DROP PUBLICATION IF EXISTS "{slot}"')


def _drop_stores(s, run: str, prefix: str) -> None:
    """What the run left: its topics, Redis keys and index (the next run's memory is its own)."""
    import redis

    drop_topics(s.bootstrap_servers, topics_named(s.bootstrap_servers, lambda t: prefix in t.split(".")))
    if "cache" in RUNS[run]:
        unlink_keys(redis.Redis.from_url(s.redis_url), f"{prefix}:*")
    if "search" in RUNS[run]:
        _drop_index(s.search_url, prefix)


def _drop_index(url: str, alias: str) -> None:
    import requests

    resp = requests.get(f"{url}/_alias/{alias}", timeout=30)
    for index in (resp.json() if resp.ok else {}):
        requests.delete(f"{url}/{index}", timeout=120)
    requests.delete(f"{url}/{alias}", timeout=120)  # if it was an index, not an alias


def _raw_bulk(s, alias: str, rows: int, chunks: list[int]) -> tuple[dict, list[dict]]:
    """The engine's raw bulk rate for the documents the run wrote (read back), on an engine without
    the run's index (as the run found it)."""
    t0 = time.perf_counter()
    docs = index_documents(s.search_url, alias)
    definition = index_definition(s.search_url, alias)
    print(f"read back {len(docs):,} documents of {alias} in {time.perf_counter() - t0:.1f} s", flush=True)
    if len(docs) != rows:
        print(f"  (the index holds {len(docs):,} documents, not {rows:,})", flush=True)
    _drop_index(s.search_url, alias)
    raw, sweep = raw_bulk_sweep(s.search_url, docs, chunks, definition)
    return {**raw, "mappings_from": alias}, sweep


def _ratios(by_run: dict[str, dict], raw: dict | None, rows: int) -> dict:
    cache, search, both = by_run.get("cache"), by_run.get("search"), by_run.get("both")
    ratios: dict = {}
    for run, key in ((cache, "redis_vs_snapshot"), (search, "search_vs_snapshot"), (both, "both_vs_snapshot")):
        if run and run["snapshot_into_kafka_s"]:
            ratios[key] = round(run["synced_s"] / run["snapshot_into_kafka_s"], 3)
    if search and raw:
        ratios["search_docs_per_s"] = round(rows / search["synced_s"])
        ratios["search_vs_raw"] = round(ratios["search_docs_per_s"] / raw["docs_per_s"], 3)
    if both and cache and search:
        ratios["both_vs_slowest"] = round(both["synced_s"] / max(cache["synced_s"], search["synced_s"]), 3)
    met = {}
    for key in ("redis_vs_snapshot", "search_vs_snapshot", "both_vs_snapshot"):
        if key in ratios:
            met[key] = ratios[key] <= TARGETS[f"{key}_max"]
    if "search_vs_raw" in ratios:
        met["search_vs_raw"] = ratios["search_vs_raw"] >= TARGETS["search_vs_raw_min"]
    if "both_vs_slowest" in ratios:
        met["both_vs_slowest"] = ratios["both_vs_slowest"] <= TARGETS["both_vs_slowest_max"]
    return {"ratios": ratios, "targets": TARGETS, "met": met,
            "every_row_in_every_store": all(r["every_row"] for r in by_run.values())}


def _s(seconds: float | None) -> str:
    return f"{seconds:.1f} s" if seconds is not None else "-"


def _print_summary(result: dict) -> None:
    rows = result["rows"]
    print(f"bootstrap of {rows:,} rows ({result['partitions']} partitions, {result['search_engine']}):")
    print(f"{'run':<8}{'sinks':<18}{'into Kafka':>12}{'synced':>10}{'rows/s':>10}{'exited':>10}  stores")
    for run, r in result["by_run"].items():
        print(f"{run:<8}{','.join(r['sinks']):<18}{_s(r['snapshot_into_kafka_s']):>12}{_s(r['synced_s']):>10}"
              f"{r['rows_per_s']:>10,}{_s(r['exit_s']):>10}  "
              + ", ".join(f"{k} {v:,}" for k, v in r["stores"].items())
              + ("" if r["every_row"] else "  NOT every row"))
    if result["raw_bulk"]:
        sweep = ", ".join(f"{x['bulk_chunk']:,}: {x['docs_per_s']:,}" for x in result["raw_bulk_sweep"])
        print(f"raw bulk, same documents: best {result['raw_bulk']['docs_per_s']:,} docs/s "
              f"({result['raw_bulk']['bulk_chunk']:,} per request; {sweep})")
    ratios, met, t = result["ratios"], result["met"], result["targets"]

    def verdict(key: str) -> str:
        return "met" if met[key] else "NOT met"

    for key, what in (("redis_vs_snapshot", "Redis"), ("search_vs_snapshot", "search"), ("both_vs_snapshot", "both")):
        if key in ratios:
            print(f"{what} synced / snapshot into Kafka: {ratios[key]:.2f}x "
                  f"(target <= {t[key + '_max']}x: {verdict(key)})")
    if "search_vs_raw" in ratios:
        print(f"search over the bootstrap {ratios['search_docs_per_s']:,} docs/s / raw bulk: "
              f"{ratios['search_vs_raw']:.2f}x (target >= {t['search_vs_raw_min']}x: {verdict('search_vs_raw')})")
    if "both_vs_slowest" in ratios:
        print(f"both / max(Redis, search): {ratios['both_vs_slowest']:.2f}x "
              f"(target <= {t['both_vs_slowest_max']}x: {verdict('both_vs_slowest')})")
    print("every row in every store: " + ("yes" if result["every_row_in_every_store"] else "NO"))


def _drop_earlier_slots(conn) -> None:
    """The bench stack's Postgres outlives a run: inactive slots of earlier runs of this benchmark
    (slot = publication = b + 6 hex) would use up max_replication_slots and hold WAL."""
    for (slot,) in conn.execute("SELECT slot_name FROM pg_replication_slots WHERE NOT active "
                                "AND slot_name ~ '^b[0-9a-f]{6}$'").fetchall():
        conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        conn.execute(f'DROP PUBLICATION IF EXISTS "{slot}"')
        print(f"dropped the slot and publication {slot} of an earlier run", flush=True)


if __name__ == "__main__":
    main()
