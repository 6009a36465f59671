"""Nested documents under load (issue #16), beside the flat tables of the same run: orders with on
average 5 lines and a customer (customer 1 has 1,000 orders), one `cdckit run` keeping both the
flat indexes/keys and the `orders` documents.

Measured, in one run:
- the initial build: snapshot to every document present (and the flat lines), documents/s;
- freshness at a fixed commit rate (pgbench, so the load costs almost nothing): each commit updates
  two lines of one order with the same `seq` and the server's clock; commit to visible in the
  order's document (Redis and the index) and in the flat line key (with `--flat-search`, in the flat
  line's index document too); and how often a document is seen
  with one of the two lines and not the other ("torn"), for how long; where a documents batch spends
  its time (the job's own figures per batch);
- fan-out: a rename of customer 1 until all its 1,000 order documents show it, beside the flat key;
- rebuild: `cdckit rebuild all` beside the live job, its documents' replay from the compacted
  topics (records/s) beside its flat bulk, and `cdckit rebuild cache` of the flat tables (records/s).

    .venv/bin/python benchmarks/nested_documents.py [--orders 5000] [--rate 1000] [--warmup 20] [--duration 30]
                                                    [--no-rebuild] [--flat-search]
"""
from __future__ import annotations

import argparse
import bisect
import json
import os
import re
import resource
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (ROOT, RssSampler, bench_stack, drop_topics, pgbench, searched_sources,  # noqa: E402
                               scratch_dir, stop_job, topics_named, unlink_keys, write_result)
from benchmarks.freshness_report import percentiles  # noqa: E402

WATCHED = 100
POLL_S = 0.1   # the pollers: 10 reads a second of the watched keys (a few ms of CPU each)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--orders", type=int, default=5000)
    ap.add_argument("--rate", type=int, default=1000, help="commits/s")
    ap.add_argument("--duration", type=float, default=30, help="seconds of load measured, after the warm-up")
    ap.add_argument("--warmup", type=float, default=20,
                    help="seconds of load first, not measured: the Python workers the load needs are started, "
                         "the queries caught up")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--no-rebuild", action="store_true", help="only the initial build, freshness and fan-out")
    ap.add_argument("--flat-search", action="store_true",
                    help="also poll the flat lines' index documents (each store's documents then compare with "
                         "its own flat rows; the poller's searches cost the engine ~0.1 core on 2 cores, enough "
                         "to slow the documents' query: off by default)")
    args = ap.parse_args()
    import psycopg
    import redis
    import yaml

    tmp = scratch_dir("cdckit-nested-")
    with bench_stack() as s, RssSampler(s) as sampler:
        p = f"n{uuid.uuid4().hex[:6]}"
        dsn = dict(host="127.0.0.1", port=s.ports["postgres"], dbname="cdckit", user="postgres")
        lines_n = args.orders * 5
        with psycopg.connect(**dsn, autocommit=True) as conn:
            for slot, in conn.execute("SELECT slot_name FROM pg_replication_slots WHERE NOT active").fetchall():
                conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
            conn.execute(f"CREATE TABLE {p}_customers (id int PRIMARY KEY, name text, email text)")
            conn.execute(f"CREATE TABLE {p}_orders (id int PRIMARY KEY, customer_id int, status text, "
                         "total numeric(12,2))")
            conn.execute(f"CREATE TABLE {p}_lines (id int PRIMARY KEY, order_id int, line_no int, sku text, "
                         "qty int, seq bigint, at bigint)")
            conn.execute(f"CREATE SEQUENCE {p}_seq")
            # every commit's order, seq and time (not captured: the publication names the synced tables)
            conn.execute(f"CREATE UNLOGGED TABLE {p}_commits (o int, seq bigint, at bigint)")
            conn.execute(f"INSERT INTO {p}_customers SELECT g, 'customer ' || g, 'c' || g || '@x.org' "
                         "FROM generate_series(1, 200) g")
            # customer 1: 1,000 orders; the others share the rest
            conn.execute(f"INSERT INTO {p}_orders SELECT g, CASE WHEN g <= 1000 THEN 1 ELSE 2 + g % 199 END, "
                         f"'open', g * 1.5 FROM generate_series(1, {args.orders}) g")
            conn.execute(f"INSERT INTO {p}_lines SELECT g, 1 + (g - 1) / 5, 1 + (g - 1) % 5, 'sku-' || g, 1, 0, 0 "
                         f"FROM generate_series(1, {lines_n}) g")
        tables = [f"public.{p}_{t}" for t in ("customers", "orders", "lines")]
        ckpt = tmp / "ckpt"
        config = {
            "topic_prefix": p, "metrics_port": 0,
            "postgres": {"host": "127.0.0.1", "port": s.ports["postgres"], "database": "cdckit", "user": "postgres",
                         "sslmode": "disable", "slot": p, "publication": p},
            "kafka": {"bootstrap_servers": s.bootstrap_servers, "partitions": args.partitions},
            "connect": {"url": s.connect_url, "heartbeat_interval_ms": 1000, "timeout_s": 30},
            "tables": [{"name": t, "index": t.split(".")[1], "redis_key": f"{t.split('.')[1]}:{{id}}"} for t in tables],
            "documents": [{"name": f"{p}-orders", "root": tables[1], "redis_key": f"{p}-order:{{id}}", "relations": [
                {"label": "lines", "table": tables[2], "type": "one_to_many", "join": {"order_id": "id"},
                 "order_by": "line_no", "columns": ["id", "line_no", "sku", "qty", "seq", "at"]},
                {"label": "customer", "table": tables[0], "type": "many_to_one", "join": {"customer_id": "id"},
                 "columns": ["name", "email"]}]}],
            "search": {"kind": "opensearch", "url": s.search_url, "index_settings": {"number_of_replicas": 0}},
            "redis": {"url": s.redis_url, "rebuild_db": 1},
            # The queries' progress events (durationMs per micro-batch) land in the Spark event log.
            "spark": {"checkpoint_dir": str(ckpt), "conf": {
                "spark.eventLog.enabled": "true", "spark.eventLog.dir": f"file://{tmp / 'events'}",
                "spark.eventLog.compress": "false"}},
        }
        (tmp / "events").mkdir()
        path = tmp / "cdckit.yaml"
        path.write_text(yaml.safe_dump(config))
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
        cdckit = [sys.executable, "-m", "pipelines.cli"]
        r = redis.Redis.from_url(s.redis_url)
        doc_count = f"cdckit:count:{p}-order:{{id}}"
        line_count = f"cdckit:count:{p}_lines:{{id}}"
        log = tmp / "job.log"
        job = None

        def start():
            return subprocess.Popen([*cdckit, "run", "-c", str(path)], cwd=ROOT, env=env, start_new_session=True,
                                    stdout=open(log, "ab"), stderr=subprocess.STDOUT)

        def wait_count(key: str, n: int, since: float, timeout: float = 600) -> float:
            """Seconds from `since` until the count key reaches n."""
            while int(r.get(key) or 0) < n:
                if job.poll() is not None or time.perf_counter() - since > timeout:
                    raise SystemExit(f"{key} did not reach {n}:\n{log.read_text()[-3000:]}")
                time.sleep(0.2)
            return time.perf_counter() - since

        result: dict = {"orders": args.orders, "lines": lines_n, "partitions": args.partitions, "rate": args.rate}
        try:
            subprocess.run([*cdckit, "connector", "apply", "-c", str(path)], cwd=ROOT, env=env, check=True)
            t0 = time.perf_counter()
            job = start()
            sampler.add_root(job.pid, "spark driver")
            flat_s = wait_count(line_count, lines_n, t0)
            docs_s = wait_count(doc_count, args.orders, t0)
            result["initial"] = {"flat_lines_s": round(flat_s, 1), "documents_s": round(docs_s, 1),
                                 "documents_per_s": round(args.orders / docs_s)}
            print(f"initial build: flat lines {flat_s:.1f} s, documents {docs_s:.1f} s", flush=True)
            time.sleep(5)
            with sampler.phase("freshness"):
                result["freshness"] = _freshness(args, dsn, p, r, s, log)
            window = result["freshness"].pop("window")
            result["freshness"]["micro_batch_ms"] = micro_batches(tmp / "events", *window)
            # CPU seconds per role over the load (warm-up included) and its tail (the machine's two
            # cores: what is left for the documents' query)
            result["freshness"]["cpu_s_per_role"] = sampler.cpu_s["freshness"]
            print(json.dumps(result["freshness"]), flush=True)
            result["fan_out"] = _fan_out(dsn, p, r)
            print(json.dumps(result["fan_out"]), flush=True)
            if not args.no_rebuild:
                _rebuilds(cdckit, path, env, result)
        finally:
            stop_job(job)
            _drop_run(s, p, r)
    _done(result)


def _drop_run(s, p: str, r) -> None:
    """What the run left on the bench stack (its connector, slot, topics, indexes, keys): the next
    run's engine and broker carry only their own."""
    import psycopg
    import requests

    requests.delete(f"{s.connect_url}/connectors/{p}-postgres", timeout=30)
    found = requests.get(f"{s.search_url}/_cat/indices/*{p}*", params={"format": "json"}, timeout=30)
    for index in (found.json() if found.ok else []):
        requests.delete(f"{s.search_url}/{index['index']}", timeout=60)
    drop_topics(s.bootstrap_servers, topics_named(s.bootstrap_servers, lambda t: t.split(".")[0] == p))
    unlink_keys(r, f"*{p}*")
    time.sleep(2)   # the connector's task gone, so its slot is free
    dsn = dict(host="127.0.0.1", port=s.ports["postgres"], dbname="cdckit", user="postgres")
    with psycopg.connect(**dsn, autocommit=True) as conn:
        for slot, in conn.execute("SELECT slot_name FROM pg_replication_slots WHERE NOT active AND slot_name = %s",
                                  (p,)).fetchall():
            conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))


def _rebuilds(cdckit: list[str], path: Path, env: dict, result: dict) -> None:
    """`cdckit rebuild cache` of the flat tables, then `rebuild all` beside the live job, then verify."""
    flat = subprocess.run([*cdckit, "rebuild", "cache", "-c", str(path), "--json"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1200)
    summary = json.loads(flat.stdout).get("summary", {}) if flat.returncode == 0 else {}
    bulk = summary.get("bulk", {})
    result["rebuild_flat_cache"] = {"records": bulk.get("records"), "seconds": bulk.get("seconds"),
                                    "records_per_s": round(bulk["records"] / bulk["seconds"])
                                    if bulk.get("seconds") else None, "exit": flat.returncode}
    # `cdckit rebuild all` beside the live job: the documents built anew from the compacted
    # topics by the rebuild's own state, handed over to the job at the switch.
    full = subprocess.run([*cdckit, "rebuild", "all", "-c", str(path), "--json"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1800)
    summary = json.loads(full.stdout).get("summary", {}) if full.returncode == 0 else {}
    docs, bulk = summary.get("documents", {}), summary.get("bulk", {})
    result["rebuild_documents"] = {
        "records": docs.get("records"), "document_writes": docs.get("documents"),
        "seconds": docs.get("seconds"), "exit": full.returncode,
        "records_per_s": round(docs["records"] / docs["seconds"]) if docs.get("seconds") else None,
        "flat_bulk_records_per_s": round(bulk["records"] / bulk["seconds"]) if bulk.get("seconds") else None}
    print(json.dumps(result["rebuild_documents"]), flush=True)
    verify = subprocess.run([*cdckit, "verify", "--json", "-c", str(path), "--timeout", "300"], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=900)
    result["verify_exact"] = json.loads(verify.stdout)["exact"] if verify.stdout else None


def _done(result: dict) -> None:
    write_result("nested_documents", result)
    print(json.dumps(result, indent=2))


BATCH_LINE = re.compile(r"(?<!rebuild: )documents batch \d+: ([\d,]+) records, ([\d,]+) documents .*?"
                        r"([\d.]+) s \(fold ([\d.]+) s: state load ([\d.]+), rows ([\d.]+), fold ([\d.]+), "
                        r"save ([\d.]+); stores ([\d.]+) s; schema check ([\d.]+) s; state ([\d.]+) MB, "
                        r"kept by the worker for (\d+) of \d+; fold task's CPU ([\d.]+) s\)")
BATCH_FIELDS = ("records", "documents", "batch_s", "fold_task_s", "state_load_s", "rows_s", "fold_s", "state_save_s",
                "stores_s", "schema_check_s", "state_mb", "state_kept", "fold_task_cpu_s")


def documents_batches(text: str) -> dict:
    """Where a documents batch spent its time, from the job's log lines (medians over the batches
    that folded records): the batch as foreachBatch runs it (the Kafka read, the shuffle, the fold
    task, the stores), the fold task's parts (the state unpickled, the records taken out of pandas,
    the fold, the state pickled) and the writes into the stores; the rest is Spark's."""
    rows = [dict(zip(BATCH_FIELDS, (float(v.replace(",", "")) for v in m))) for m in BATCH_LINE.findall(text)]
    busy = [r for r in rows if r["documents"] > 0] or rows
    if not busy:
        return {"batches": 0}
    out: dict = {"batches": len(rows), "busy_batches": len(busy)}
    for f in BATCH_FIELDS:
        vals = sorted(r[f] for r in busy)
        out[f"{f}_median"] = round(vals[len(vals) // 2], 3)
    out["batch_s_max"] = max(r["batch_s"] for r in busy)
    out["state_kept_share"] = round(sum(r["state_kept"] for r in busy) / len(busy), 3)   # one document here
    rest = sorted(r["batch_s"] - r["fold_task_s"] - r["stores_s"] - r["schema_check_s"] for r in busy)
    out["spark_s_median"] = round(rest[len(rest) // 2], 3)   # the rest of each batch: Spark's own work
    return out


# One commit: two lines of one order get the same seq and the server's clock (microseconds) before
# the commit; half the commits go to the watched orders. The first line is locked before the seq is
# drawn, so two commits on one order commit in seq order (drawn before, a higher seq could commit
# first and the lower one overwrite line `a` after it: the database itself would then hold the
# higher seq on one line only, which the torn check would take for a torn document).
PGBENCH_SCRIPT = """\\set pick random(1, 2)
\\if :pick = 1
\\set o random({w0}, {w1})
\\else
\\set o random(1, {orders})
\\endif
\\set b random(1, 4)
BEGIN;
SELECT 1 FROM {p}_lines WHERE id = (:o - 1) * 5 + 1 FOR UPDATE;
WITH s AS (SELECT nextval('{p}_seq') AS v, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS t),
u AS (UPDATE {p}_lines SET seq = s.v, at = s.t FROM s WHERE id IN ((:o - 1) * 5 + 1, (:o - 1) * 5 + 1 + :b))
INSERT INTO {p}_commits SELECT :o, v, t FROM s;
END;
"""


def _freshness(args, dsn: dict, p: str, r, s, log: Path) -> dict:
    """Commits at a fixed rate by pgbench (a C client: the load costs almost nothing), each stamped
    with the server's clock; pollers on the watched orders at 10 Hz note when each seq first shows.
    A commit is visible once its order shows its seq or a later one (every commit writes the order's
    first line; a poll sees only the newest of the commits a batch brought), so every commit of a
    watched order is measured, not only the newest of each batch."""
    import requests

    w0 = 1001 if args.orders >= 1000 + WATCHED else 1   # past customer 1's orders when there are enough
    orders = list(range(w0, w0 + WATCHED))
    script = scratch_dir("cdckit-nested-load-") / "load.sql"
    script.write_text(PGBENCH_SCRIPT.format(p=p, orders=args.orders, w0=w0, w1=w0 + WATCHED - 1))
    stop = threading.Event()
    # (order, seq) -> when a poller first saw it (seconds)
    seen: dict[str, dict[tuple[int, int], float]] = {"document_cache": {}, "document_search": {}, "flat_cache": {}}
    if args.flat_search:
        seen["flat_search"] = {}
    torn: dict[tuple[int, int], list[float]] = {}

    def top_seq(lines: list[dict]) -> int:
        return max(line["seq"] for line in lines)

    def poll_docs() -> None:
        keys = [f"{p}-order:{o}" for o in orders]
        while not stop.is_set():
            now = time.time()
            for o, raw in zip(orders, r.mget(keys)):
                if raw is None:
                    continue
                lines = json.loads(raw)["lines"]
                top = top_seq(lines)
                if top == 0:
                    continue
                seen["document_cache"].setdefault((o, top), now)
                if sum(1 for line in lines if line["seq"] == top) == 1:  # its partner line not there yet
                    torn.setdefault((o, top), [now, now])[1] = now
            time.sleep(POLL_S)

    def poll_search() -> None:
        session = requests.Session()
        while not stop.is_set():
            now = time.time()
            try:
                found = searched_sources(session, s.search_url, f"{p}-orders", [str(o) for o in orders])
            except requests.RequestException:
                found = []  # the index not there yet (or the engine busy): the next poll sees it
            for doc_id, source in found:
                top = top_seq(source["lines"])
                if top:
                    seen["document_search"].setdefault((int(doc_id), top), now)
            time.sleep(POLL_S)

    def poll_flat() -> None:
        keys = [f"{p}_lines:{(o - 1) * 5 + 1}" for o in orders]
        while not stop.is_set():
            now = time.time()
            for o, raw in zip(orders, r.mget(keys)):
                if raw is not None:
                    line = json.loads(raw)
                    if line["seq"]:
                        seen["flat_cache"].setdefault((o, line["seq"]), now)
            time.sleep(POLL_S)

    def poll_flat_search() -> None:
        """The watched orders' first lines in the flat lines index, searched as the documents are:
        the index's refresh counts for both, so the two compare."""
        session = requests.Session()
        lines = {str((o - 1) * 5 + 1): o for o in orders}
        while not stop.is_set():
            now = time.time()
            try:
                found = searched_sources(session, s.search_url, f"{p}_lines", list(lines))
            except requests.RequestException:
                found = []
            for doc_id, source in found:
                if source.get("seq"):
                    seen["flat_search"].setdefault((lines[doc_id], source["seq"]), now)
            time.sleep(POLL_S)

    pollers = (poll_docs, poll_search, poll_flat) + ((poll_flat_search,) if args.flat_search else ())
    threads = [threading.Thread(target=f, daemon=True) for f in pollers]
    own0 = resource.getrusage(resource.RUSAGE_SELF)
    for t in threads:
        t.start()
    measured_from = time.time() + args.warmup
    marks: list[int] = []   # the job log's size when the measured part began
    timer = threading.Timer(args.warmup, lambda: marks.append(log.stat().st_size))
    timer.start()
    load_cpu = pgbench(dsn, script, args.rate, args.warmup + args.duration, clients=4)
    timer.join()
    time.sleep(8)  # the tail arrives
    stop.set()
    for t in threads:
        t.join()
    import psycopg

    with psycopg.connect(**dsn, autocommit=True) as conn:
        commits = conn.execute(f"SELECT count(*) FROM {p}_commits WHERE at >= %s",
                               (int(measured_from * 1e6),)).fetchone()[0]
        every = conn.execute(f"SELECT o, seq, at FROM {p}_commits WHERE o BETWEEN %s AND %s",
                             (w0, w0 + WATCHED - 1)).fetchall()
    watched = [c for c in every if c[2] >= measured_from * 1e6]
    own = resource.getrusage(resource.RUSAGE_SELF)
    out = {"commits_per_s": round(commits / args.duration), "load": "pgbench", "warmup_s": args.warmup,
           "measured_s": args.duration, "watched_commits": len(watched),
           # CPU seconds of the load (pgbench) and of the pollers
           "load_cpu_s": round(load_cpu, 1),
           "pollers_cpu_s": round(own.ru_utime + own.ru_stime - own0.ru_utime - own0.ru_stime, 1)}
    for name, got in seen.items():
        lat, unseen = visible_after(watched, got)
        # from the load's start: the warm-up's commits too (new Python workers, queries catching up)
        out[name] = {**percentiles(lat), "never_seen": unseen,
                     "from_load_start": percentiles(visible_after(every, got)[0])}
    # Issue #40's target: documents' p50 within 1.5x of the flat line keys', p99 <= 3 s (and, with
    # --flat-search, the index's documents against the flat lines' index documents).
    for store in ("cache", "search"):
        doc, flat = out[f"document_{store}"], out.get(f"flat_{store}") or out["flat_cache"]
        if doc.get("p50") and flat.get("p50"):
            out[f"{store}_documents_vs_flat_p50"] = round(doc["p50"] / flat["p50"], 2)
            out[f"{store}_target_met"] = doc["p50"] <= 1.5 * flat["p50"] and doc["p99"] <= 3.0
    spans = [b - a for a, b in torn.values()]
    out["torn"] = {"documents_seen_torn": len(torn), "commits_seen": len(seen["document_cache"]),
                   "longest_s": round(max(spans), 3) if spans else 0.0}
    out["documents_batches"] = documents_batches(log.read_bytes()[marks[0] if marks else 0:].decode(errors="replace"))
    out["window"] = (measured_from, measured_from + args.duration)
    return out


def micro_batches(event_dir: Path, start: float, end: float) -> dict:
    """Per query (the flat tables', the documents'), the median ms of each part of the micro-batches
    that began in the measured window, from Spark's progress events; for the documents' query also its
    state operator's (rows, memory, commit ms). addBatch is what the job's per-batch line times; the
    rest (offsets, the write-ahead log, the state store's commit) comes before or after it."""
    import statistics

    from benchmarks.freshness import BATCH_PARTS, _batch_parts, _progress_events, ran_within

    progress = _progress_events(event_dir)
    out: dict = {}
    for name in sorted({p.get("name") or "?" for p in progress}):
        mine = [p for p in progress if (p.get("name") or "?") == name]
        parts = _batch_parts(mine, start, end)
        ops = [op for p in ran_within(mine, start, end) for op in p.get("stateOperators", [])]
        if ops:
            for k in ("commitTimeMs", "allUpdatesTimeMs", "numRowsTotal", "memoryUsedBytes"):
                vals = [op.get(k) for op in ops if op.get(k) is not None]
                parts[f"state_{k}"] = round(statistics.median(vals)) if vals else None
        out[name] = parts
        print(f"{name}: micro-batch median ms: " + ", ".join(f"{k} {parts[k]}" for k in (*BATCH_PARTS, "batches")),
              flush=True)
    return out


def visible_after(commits: list[tuple[int, int, int]], seen: dict[tuple[int, int], float]) -> tuple[list[float], int]:
    """Seconds from each commit (order, seq, server time in µs) until its order first showed that seq
    or a later one; and how many commits never showed."""
    by_order: dict[int, list[tuple[int, float]]] = {}
    for (o, seq), at in seen.items():
        by_order.setdefault(o, []).append((seq, at))
    first_from: dict[int, tuple[list[int], list[float]]] = {}
    for o, items in by_order.items():
        items.sort()
        seqs, times = [q for q, _ in items], [t for _, t in items]
        for i in range(len(times) - 2, -1, -1):   # the earliest time any seq >= this one showed
            times[i] = min(times[i], times[i + 1])
        first_from[o] = (seqs, times)
    out, unseen = [], 0
    for o, seq, at in commits:
        seqs, times = first_from.get(o, ([], []))
        i = bisect.bisect_left(seqs, seq)
        if i == len(seqs):
            unseen += 1
        else:
            out.append(times[i] - at / 1e6)
    return out, unseen


def _fan_out(dsn: dict, p: str, r) -> dict:
    import psycopg

    keys = [f"{p}-order:{o}" for o in range(1, 1001)]
    with psycopg.connect(**dsn, autocommit=True) as conn:
        conn.execute(f"UPDATE {p}_customers SET name = 'renamed' WHERE id = 1")
    t0 = time.perf_counter()
    flat_s = None
    while time.perf_counter() - t0 < 300:
        if flat_s is None and json.loads(r.get(f"{p}_customers:1") or b"{}").get("name") == "renamed":
            flat_s = time.perf_counter() - t0
        if all(v and json.loads(v)["customer"]["name"] == "renamed" for v in r.mget(keys)):
            return {"documents": 1000, "all_documents_s": round(time.perf_counter() - t0, 2),
                    "flat_customer_s": round(flat_s, 2) if flat_s is not None else None}
        time.sleep(0.05)
    return {"documents": 1000, "all_documents_s": None, "flat_customer_s": flat_s}


if __name__ == "__main__":
    main()
