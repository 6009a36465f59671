"""Freshness under live load: commit-to-visible latency at fixed commit rates, measured from the
outside (a writer records commit times, a poller reads Redis and the index) and from the inside
(the pipeline's `cdckit_change_visible_seconds` histogram: applied time minus Debezium's source
timestamp). Also: Debezium's own production rate in the same run, lag over time, and the same
events replayed by the Spark job and by a plain confluent-kafka consumer. JSON + PNGs.

Each Kafka source of `--sources` (python: the project's `cdckit_kafka`; jvm: Spark's built-in `kafka`
source) gets a fresh job with fresh stores, one after another on the same table and topic, and the
same warm-up and rates; the replay is measured with each source and with the plain consumer.

    .venv/bin/python benchmarks/freshness.py [--rates 500,2000,5000] [--duration 30] [--trigger "500 ms"]
                                             [--warmup 10] [--topology single|split] [--sources python,jvm]

Targets (issue #7): at 2,000 commits/s Redis p50 <= 1.0 s, p99 <= 2.5 s; search p99 <= 3 s;
the pipeline keeps up with >= 0.9x Debezium's production rate.

Also per rate phase: where a micro-batch's time goes (median `durationMs` of Structured Streaming's
progress: latestOffset, queryPlanning, walCommit, addBatch, commitOffsets, triggerExecution), from the
job's Spark event log (`spark.eventLog.enabled` in the jobs' config: the progress events are in it);
and across the run the peak memory per process role (benchmarks.common.RssSampler: the bench stack's
servers, the `cdckit run` jobs and this process, RSS sampled every 0.5 s), a column per source's
latency phases and one for the throughput section; and per rate phase the cores each role kept busy
while the load ran (`cores_busy`, from the processes' CPU time: on a small machine the load, Debezium,
the broker and the search engine share the cores with the job).

The index's poller reads the watched documents with a search by ids (`--search-read search`): what
a search sees after the engine's refresh. `--search-read get` reads them with a realtime multi-get,
which makes the engine refresh for every changed document it is asked for: a load of the poller's own.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (SEARCH_READS, ROOT, RssSampler, bench_stack, scratch_dir, cores_by_role,  # noqa: E402
                               create_orders, job_config, searched_sources, wait_caught_up,
                               write_result)
from benchmarks.freshness_report import histogram_percentiles, percentiles, plot, print_tables  # noqa: E402

ROWS = 20_000
HOT = 2_000          # rows the load updates (and the pollers watch a sample of)
WATCHED = 100
METRICS_PORT = 29764   # below the ephemeral range (32768-60999): no outgoing connection holds it
# Structured Streaming's progress `durationMs` parts, in the order a micro-batch runs them.
BATCH_PARTS = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets", "triggerExecution")


class Load:
    """Commits at a fixed rate from several connections; each commit updates one hot row's `seq`."""

    def __init__(self, dsn: dict, table: str, rate: int, threads: int = 4):
        self.dsn, self.table, self.rate, self.threads = dsn, table, rate, threads
        self.committed: dict[tuple[int, int], float] = {}
        self.count = 0
        self.stop = threading.Event()

    def run(self, duration: float) -> float:
        workers = [threading.Thread(target=self._writer, args=(i, duration)) for i in range(self.threads)]
        started = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        return self.count / (time.perf_counter() - started)

    def _writer(self, n: int, duration: float) -> None:
        import psycopg

        rnd = random.Random(n)
        share = self.rate / self.threads
        with psycopg.connect(**self.dsn, autocommit=True) as conn:
            conn.execute("SET synchronous_commit = off")  # the load generator, not the pipeline, is the point
            t0 = time.perf_counter()
            i = 0
            while time.perf_counter() - t0 < duration:
                target = t0 + i / share
                delay = target - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                k = rnd.randint(1, HOT)
                # The server's clock as the statement ends (the commit follows at once): when this
                # thread gets the answer back depends on its turn on the cores, not on the commit.
                seq, at = conn.execute(f"UPDATE {self.table} SET seq = seq + 1, amount = amount + 1, "
                                       f"updated_at = now() WHERE id = %s "
                                       f"RETURNING seq, extract(epoch from clock_timestamp())::float8", (k,)).fetchone()
                self.committed[(k, seq)] = at
                self.count += 1
                i += 1


class Poller:
    """Reads a sample of hot keys from a store; a seq seen for the first time is visible at that
    moment (an upper bound by the poll interval)."""

    def __init__(self, read, keys: list[int], interval: float, committed: dict):
        self.read, self.keys, self.interval, self.committed = read, keys, interval, committed
        self.seen: dict[int, int] = {}
        self.latencies: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            now = time.time()
            for k, seq in self.read(self.keys).items():
                if seq is not None and seq > self.seen.get(k, -1):
                    self.seen[k] = seq
                    at = self.committed.get((k, seq))
                    if at is not None:
                        self.latencies.append(max(0.0, now - at))
            time.sleep(self.interval)


def histogram(metrics_url: str) -> dict[float, float]:
    import requests

    out = {}
    for line in requests.get(metrics_url, timeout=5).text.splitlines():
        if line.startswith("cdckit_change_visible_seconds_bucket"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            out[float("inf") if le == "+Inf" else float(le)] = float(line.rsplit(" ", 1)[1])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", default="500,2000,5000")
    ap.add_argument("--duration", type=float, default=30)
    ap.add_argument("--trigger", default="500 ms")
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--warmup", type=float, default=10, help="seconds of unmeasured load at the first rate")
    ap.add_argument("--search-read", choices=SEARCH_READS, default="search",
                    help="how the index's poller reads the watched documents: search (an ids query: visible as a "
                         "search sees them, after the engine's refresh) or get (realtime multi-get: each poll of a "
                         "changed document forces a refresh, an engine load of the benchmark's own making)")
    ap.add_argument("--master", default=None, help="the jobs' spark.master (default: cdckit's)")
    ap.add_argument("--label", default="", help="suffix for the JSON/PNG names (tuning runs)")
    ap.add_argument("--topology", choices=["split", "single"], default="single",
                    help="split: one `cdckit run` per store (sinks [cache] / [search], each its own checkpoint), so "
                         "the slower index never holds the cache back (on 2 cores the second Spark driver costs more "
                         "than that gains); single: one job writes both stores")
    ap.add_argument("--sources", default="python,jvm",
                    help="Spark's Kafka source, one fresh job (and fresh stores) per source, one after another on the "
                         "same table and topic: python (cdckit_kafka), jvm (the built-in kafka source; needs the "
                         "spark-sql-kafka jar from scripts/setup). The throughput section replays the topic with each "
                         "and with a plain consumer")
    args = ap.parse_args()
    import requests

    from benchmarks.sync_throughput import parse_sources

    sources = parse_sources(args.sources)
    rates = [int(r) for r in args.rates.split(",")]
    tmp = scratch_dir("cdckit-fresh-")
    with bench_stack() as s, RssSampler(s) as sampler:
        sampler.add_root(os.getpid(), "benchmark")  # the load and pollers; the throughput section's Spark
        prefix = f"f{uuid.uuid4().hex[:6]}"
        table = f"public.{prefix}_orders"
        dsn = dict(host="127.0.0.1", port=s.ports["postgres"], dbname="cdckit", user="postgres")
        create_orders(dsn, table, ROWS, with_items=True)
        config = job_config(s, dsn, prefix, table, args.partitions, args.trigger, tmp / "ckpt", METRICS_PORT)
        if args.master:
            config["spark"]["master"] = args.master
        topic = f"{prefix}.{table}"
        by_source = {}
        try:
            for n, source in enumerate(sources):
                with sampler.phase(f"{source} source"):
                    by_source[source] = _measure_source(s, source, config, args, rates, dsn, table, topic, tmp,
                                                        apply_connector=n == 0, sampler=sampler)
        finally:
            requests.delete(f"{s.connect_url}/connectors/{prefix}-postgres", timeout=30)
        with sampler.phase("throughput"):
            throughput = _throughput(s, topic, tmp, sources)
    result = {"topology": args.topology, "warmup_s": args.warmup, "trigger": args.trigger, "partitions": args.partitions,
              "search_read": args.search_read, "master": args.master, "rows": ROWS, "rates": rates,
              "duration_s": args.duration, "sources": sources, "by_source": by_source,
              "throughput": throughput, "memory": sampler.as_json()}
    name = "freshness" + (f"_{args.label}" if args.label else "")
    write_result(name, result)
    print_tables(result)
    _print_batch_parts(result)
    print()
    print(sampler.table())
    plot(result, name)


def _measure_source(s, source: str, base: dict, args, rates: list[int], dsn: dict, table: str, topic: str,
                    tmp: Path, apply_connector: bool, sampler: RssSampler | None = None) -> dict:
    """A fresh job (fresh checkpoint, index and Redis keys) with one Kafka source: it replays the
    topic from its start (the snapshot; for a later source also the earlier sources' load), then
    warm-up and the phases. The job is stopped at the end."""
    import orjson
    import redis
    import requests
    import yaml

    from connectors.kafka.offsets import end_offsets

    prefix = base["topic_prefix"]
    name = f"{prefix}_{source}"  # index and Redis key prefix of this source's stores
    config = {**base, "tables": [{"name": table, "index": name, "redis_key": f"{name}:{{id}}"}],
              "spark": {**base["spark"], "kafka_source": source}}
    layout = {"cache": ["cache"], "search": ["search"]} if args.topology == "split" else {"both": ["search", "cache"]}
    paths, ckpts, metrics_urls, event_logs = {}, [], [], {}
    for n, (part, sinks) in enumerate(layout.items()):
        ckpts.append(tmp / f"ckpt-{source}-{part}")
        metrics_urls.append(f"http://127.0.0.1:{METRICS_PORT + n}/metrics")
        paths[part] = tmp / f"cdckit-{source}-{part}.yaml"
        # The job's progress events (durationMs per micro-batch) land in its Spark event log.
        event_logs[part] = tmp / f"events-{source}-{part}"
        event_logs[part].mkdir(parents=True, exist_ok=True)
        conf = {**config["spark"].get("conf", {}), "spark.eventLog.enabled": "true",
                "spark.eventLog.dir": f"file://{event_logs[part]}", "spark.eventLog.compress": "false"}
        paths[part].write_text(yaml.safe_dump({**config, "sinks": sinks, "metrics_port": METRICS_PORT + n,
                                               "spark": {**config["spark"], "checkpoint_dir": str(ckpts[-1]),
                                                         "conf": conf}}))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    cdckit = [sys.executable, "-m", "pipelines.cli"]
    if apply_connector:
        subprocess.run([*cdckit, "connector", "apply", "-c", str(next(iter(paths.values())))], cwd=ROOT, env=env,
                       check=True)
    logs = {part: tmp / f"job-{source}-{part}.log" for part in paths}
    jobs = [subprocess.Popen([*cdckit, "run", "-c", str(path)], cwd=ROOT, env=env, start_new_session=True,
                             stdout=open(logs[part], "wb"), stderr=subprocess.STDOUT)
            for part, path in paths.items()]
    for job in jobs:
        if sampler is not None:
            sampler.add_root(job.pid, "spark driver")
    r = redis.Redis.from_url(s.redis_url)
    tag = f"[{source} source]"
    try:
        t0 = time.perf_counter()
        while int(r.get(f"cdckit:count:{name}:{{id}}") or 0) < ROWS:
            if any(j.poll() is not None for j in jobs) or time.perf_counter() - t0 > 300:
                raise SystemExit(f"{tag} the pipeline did not apply the snapshot:\n" + "".join(
                    p.read_text()[-3000:] for p in logs.values()))
            time.sleep(1)
        for ckpt in ckpts:
            wait_caught_up(s.bootstrap_servers, ckpt, topic)  # the snapshot batch committed too
        catch_up_s = time.perf_counter() - t0
        print(f"{tag} {ROWS:,} rows applied and the topic caught up in {catch_up_s:.1f} s", flush=True)
        watched = random.Random(1).sample(range(1, HOT + 1), WATCHED)

        def read_cache(keys):
            vals = r.mget([f"{name}:{k}" for k in keys])
            return {k: (orjson.loads(v)["seq"] if v else None) for k, v in zip(keys, vals)}

        search_session = requests.Session()

        def read_search(keys):
            return {int(i): src["seq"] for i, src in searched_sources(search_session, s.search_url, name,
                                                                       [str(k) for k in keys], args.search_read)}

        if args.warmup:
            # A running job, as in production: the first seconds after the snapshot start Python
            # workers and meet Debezium's switch to streaming (--warmup 0 measures that too).
            Load(dsn, table, rates[0]).run(args.warmup)
            for ckpt in ckpts:
                wait_caught_up(s.bootstrap_servers, ckpt, topic)
        phases, lag_trace = [], []
        run_start = time.time()
        for rate in rates:
            load = Load(dsn, table, rate)
            pollers = {"cache": Poller(read_cache, watched, 0.02, load.committed),
                       "search": Poller(read_search, watched, 0.05, load.committed)}
            threads = [threading.Thread(target=p.run, daemon=True) for p in pollers.values()]
            for t in threads:
                t.start()
            hist_before = [histogram(url) for url in metrics_urls]
            end_before = sum(int(o) for o in end_offsets({"bootstrap.servers": s.bootstrap_servers}, [topic])
                             .get(topic, {}).values())
            applied_before = [_applied(url) for url in metrics_urls]
            tracing = threading.Event()
            tracer = threading.Thread(target=_trace_lag, args=(s.bootstrap_servers, ckpts, topic, rate,
                                                               run_start, lag_trace, tracing), daemon=True)
            tracer.start()
            cpu_before = sampler.cpu_seconds() if sampler is not None else {}
            started, wall_started = time.perf_counter(), time.time()
            achieved = load.run(args.duration)
            load_s = time.perf_counter() - started
            cpu_after = sampler.cpu_seconds() if sampler is not None else {}
            wall_ended = time.time()
            produced = sum(int(o) for o in end_offsets({"bootstrap.servers": s.bootstrap_servers}, [topic])
                           .get(topic, {}).values()) - end_before
            # The slowest job counts (split: the search job).
            applied_in_load = min(_applied(url) - before for url, before in zip(metrics_urls, applied_before))
            time.sleep(8)  # let the tail arrive before the pollers stop
            tracing.set()
            for p in pollers.values():
                p.stop.set()
            for t in threads:
                t.join()
            phase_trace = [t for t in lag_trace if t["rate"] == rate]
            final_lag = phase_trace[-1]["lag"] if phase_trace else None
            phase = {
                "source": source,
                "rate": rate, "achieved_commits_per_s": round(achieved), "duration_s": round(load_s, 1),
                "outside": {k: percentiles(p.latencies) for k, p in pollers.items()},
                "inside": {part: histogram_percentiles(before, histogram(url))
                           for part, before, url in zip(layout, hist_before, metrics_urls)},
                "debezium_records_per_s": round(produced / load_s),
                "pipeline_records_per_s": round(applied_in_load / load_s),
                "pipeline_vs_debezium": round(applied_in_load / produced, 3) if produced else None,
                "lag_after_tail": final_lag,
                # What shared the machine's cores while the load ran ("benchmark": the load
                # generator, the pollers and the samplers of this process).
                "cores_busy": cores_by_role(cpu_before, cpu_after, load_s),
                "window": [wall_started, wall_ended],  # for the micro-batch breakdown (replaced by it below)
            }
            phase["keeps_up"] = bool(final_lag is not None and final_lag <= max(rate, 100))
            phases.append(phase)
            print(json.dumps(phase), flush=True)
    finally:
        for job in jobs:
            job.send_signal(signal.SIGTERM)
        for job in jobs:
            try:
                job.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(job.pid, signal.SIGKILL)
            if sampler is not None:
                sampler.remove_root(job.pid)
    progress = {part: _progress_events(path) for part, path in event_logs.items()}
    for phase in phases:
        start, end = phase.pop("window")
        phase["batch_ms"] = {part: _batch_parts(events, start, end) for part, events in progress.items()}
        print(f"{tag} {phase['rate']:,} commits/s, micro-batch median ms: " + "; ".join(
            f"{part} " + ", ".join(f"{k} {v}" for k, v in parts.items()) for part, parts in phase["batch_ms"].items()),
            flush=True)
        print(f"{tag} {phase['rate']:,} commits/s, cores busy while the load ran: "
              + ", ".join(f"{role} {cores:.2f}" for role, cores in phase["cores_busy"].items()), flush=True)
    out = {"catch_up_s": round(catch_up_s, 1), "phases": phases, "lag_trace": lag_trace,
           "sustained_commits_per_s": max([p["rate"] for p in phases if p["keeps_up"]], default=None)}
    at_2000 = next((p for p in phases if p["rate"] == 2000), None)
    if at_2000:
        c, se = at_2000["outside"]["cache"], at_2000["outside"]["search"]
        out["targets_at_2000"] = {
            "cache_p50_le_1s": c["p50"] is not None and c["p50"] <= 1.0,
            "cache_p99_le_2_5s": c["p99"] is not None and c["p99"] <= 2.5,
            "search_p99_le_3s": se["p99"] is not None and se["p99"] <= 3.0,
            "pipeline_ge_0_9_debezium": (at_2000["pipeline_vs_debezium"] or 0) >= 0.9}
    return out


def _progress_events(event_dir: Path) -> list[dict]:
    """Structured Streaming's progress events (QueryProgressEvent) from a job's Spark event log(s):
    a file per application, or (Spark 4's rolling v2 layout) a directory `eventlog_v2_<app>` of
    `events_<n>_<app>` files."""
    import re

    def order(path: Path) -> tuple:
        m = re.match(r"events_(\d+)_", path.name)
        return (str(path.parent), int(m[1]) if m else 0, path.name)

    files = [f for f in event_dir.rglob("*") if f.is_file() and not f.name.startswith((".", "appstatus"))]
    out = []
    for path in sorted(files, key=order):
        with open(path, "rb") as f:
            for line in f:
                if b"QueryProgressEvent" not in line:
                    continue
                try:
                    out.append(json.loads(line)["progress"])
                except (ValueError, KeyError):
                    continue  # a last line cut short by a kill
    return out


def ran_within(progress: list[dict], start: float, end: float) -> list[dict]:
    """The progress events of micro-batches that began within [start, end] (wall clock) and ran (an
    idle trigger reports no addBatch)."""
    from datetime import datetime, timezone

    def began(p: dict) -> float:
        return datetime.strptime(p["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()

    return [p for p in progress if "addBatch" in p.get("durationMs", {}) and start <= began(p) <= end]


def _batch_parts(progress: list[dict], start: float, end: float) -> dict:
    """Median durationMs per part over the micro-batches that began within [start, end] and ran."""
    batches = [p["durationMs"] for p in ran_within(progress, start, end)]
    out: dict = {k: (round(statistics.median(b.get(k, 0) for b in batches)) if batches else None)
                 for k in BATCH_PARTS}
    out["batches"] = len(batches)
    return out


def _print_batch_parts(result: dict) -> None:
    print()
    print("micro-batch time, median ms (Spark progress durationMs) per rate phase:")
    print(f"{'source':<8}{'part':<8}{'commits/s':>10}{'batches':>9}" + "".join(f"{k:>17}" for k in BATCH_PARTS))
    for source, by in result["by_source"].items():
        for phase in by["phases"]:
            for part, parts in phase.get("batch_ms", {}).items():
                print(f"{source:<8}{part:<8}{phase['rate']:>10,}{parts['batches']:>9}"
                      + "".join(f"{'-' if parts[k] is None else parts[k]:>17}" for k in BATCH_PARTS))


def _applied(metrics_url: str) -> float:
    import requests

    for line in requests.get(metrics_url, timeout=5).text.splitlines():
        if line.startswith("cdckit_records_total"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _trace_lag(bootstrap: str, ckpts: list[Path], topic: str, rate: int, run_start: float, trace: list,
               done: threading.Event) -> None:
    """Records between the topic's end and the last committed batch of the job furthest behind,
    twice a second. One consumer asks for the ends all along: a new client per sample cost the
    broker and this process a connection and a metadata round each time, CPU the job under
    measurement shares on a small machine."""
    from pipelines.state.query_offsets import committed_offsets
    from connectors.kafka.offsets import Watermarks, to_offsets

    marks = Watermarks({"bootstrap.servers": bootstrap}, [topic])
    try:
        while not done.wait(0.5):
            try:
                end = to_offsets(marks.high(marks.partitions())).get(topic, {})
                committed = [(committed_offsets(ckpt) or {}).get(topic, {}) for ckpt in ckpts]
            except Exception:  # noqa: BLE001 - a missed sample is fine
                continue
            lag = max(sum(max(0, int(o) - int(c.get(p, 0))) for p, o in end.items()) for c in committed)
            trace.append({"t": round(time.time() - run_start, 2), "rate": rate, "lag": lag})
    finally:
        marks.close()


def _throughput(s, topic: str, tmp: Path, sources: list[str]) -> dict:
    """The whole topic of the run replayed into fresh stores: a plain consumer, then the Spark job
    with each Kafka source (each after an unmeasured replay of its own: JIT, Python workers, as a
    running job is)."""
    from benchmarks.sync_throughput import config_for, plain_consumer, spark_job
    from pipelines.spark.session import spark_session
    from connectors.kafka.offsets import end_offsets

    out = {}
    for only in ("redis",):
        partitions = len(end_offsets({"bootstrap.servers": s.bootstrap_servers}, [topic]).get(topic, {}))
        plain = plain_consumer(config_for(s, topic, tmp, only), topic, partitions)
        row = {"plain_events_per_s": round(plain)}
        spark = spark_session(config_for(s, topic, tmp, only, source=sources[0]))
        for source in sources:
            spark_job(spark, config_for(s, topic, tmp, only, source=source))  # warm-up
            rate, records = spark_job(spark, config_for(s, topic, tmp, only, source=source))
            row.update({"records": records, f"{source}_events_per_s": round(rate),
                        f"{source}_vs_plain": round(rate / plain, 3)})
        spark.stop()
        out[only] = row
    return out


if __name__ == "__main__":
    main()
