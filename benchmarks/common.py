"""Shared by the benchmarks: a local stack of their own, synthetic Debezium topics, JSON output, the search
engine's raw bulk rate for given documents, and peak memory per process role (RssSampler)."""
from __future__ import annotations

import json
import os
import platform
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
BENCH_PORTS = {"postgres": 55732, "kafka": 59392, "connect": 58383, "redis": 56679, "search": 59500, "spark": 57277}


def scratch_dir(prefix: str) -> Path:
    """A temporary folder for one benchmark run (checkpoints, logs, Spark's event log), removed when
    the script exits: a run leaves tens of MB and the benchmarks are run again and again.
    CDCKIT_BENCH_KEEP_TMP=1 keeps it (the logs a result names)."""
    import atexit
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix=prefix))
    if not os.environ.get("CDCKIT_BENCH_KEEP_TMP"):
        atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


@contextmanager
def bench_stack(keep: bool = False) -> Iterator:
    """The bench stack, up for the run and down after it (`keep`: left up). It starts empty: what
    earlier runs left (topics, tables, indexes: gigabytes after a few sessions) slows the servers
    and makes runs of different days incomparable. CDCKIT_BENCH_KEEP_STATE=1 keeps it."""
    from pipelines.devstack import stack
    from pipelines.devstack.servers import wipe
    from pipelines.devstack.settings import StackSettings

    settings = StackSettings(state_dir=ROOT / ".devstack-bench", ports=dict(BENCH_PORTS))
    if not os.environ.get("CDCKIT_BENCH_KEEP_STATE"):
        if any(server.pid() is not None for server in stack.servers(settings)):
            print("bench stack already up: its state kept", flush=True)
        else:
            wipe(settings)
    stack.up(settings, say=lambda line: print(line, flush=True))
    try:
        yield settings
    finally:
        if not keep:
            from pipelines.spark.partition_apply import release_kafka_clients

            try:
                release_kafka_clients()   # before the broker stops: no reconnect lines after the figures
            finally:
                stack.down(settings, say=lambda _: None)   # whatever that did, the servers stop


def synthetic_topic(bootstrap: str, events: int, keys: int, partitions: int, table: str = "public.bench") -> str:
    """Debezium-shaped change events (inserts then updates, some deletes + tombstones)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"bench{uuid.uuid4().hex[:6]}.{table}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(15)
    schema, name = table.split(".")
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 1_000_000, "compression.type": "lz4"})
    lsn = 1 << 30
    for i in range(events):
        k = i % keys
        lsn += 100
        key = json.dumps({"id": k}).encode()
        op = "c" if i < keys else ("d" if i % 97 == 0 else "u")
        row = {"id": k, "name": f"customer {k} ünïcødé", "email": f"c{k}@example.com", "balance": f"{i}.25",
               "tags": [k % 7, k % 11], "updated_at": "2026-11-22T10:00:00.000000Z", "seq": i,
               # as Debezium sends a date, a timestamp and a jsonb (typed by BENCH_COLUMNS' types)
               "born": 7000 + k % 9000, "seen": 1_763_805_600_000_000 + i, "doc": json.dumps({"tier": k % 3, "n": i})}
        value = json.dumps({"before": None, "after": None if op == "d" else row, "op": op, "ts_ms": 0,
                            "source": {"schema": schema, "table": name, "lsn": lsn, "snapshot": "false",
                                       "sequence": json.dumps([str(lsn - 50), str(lsn)]), "ts_ms": 0}}).encode()
        while True:
            try:
                p.produce(topic, key=key, value=value, partition=k % partitions)
                break
            except BufferError:
                p.poll(0.1)
        if op == "d":
            p.produce(topic, key=key, value=None, partition=k % partitions)
    p.flush(120)
    return topic


# The synthetic rows' columns, for the table the benchmarks create so the pipeline types its documents.
BENCH_COLUMNS = ("id bigint PRIMARY KEY, name text, email text, balance numeric(14,2), tags int[], updated_at timestamptz, "
                 "seq bigint, born date, seen timestamp, doc jsonb")


def create_bench_table(settings, table: str = "public.bench", present: bool = True) -> None:
    """present=False drops it: documents of its topic are then untyped (no types in the catalog)."""
    import psycopg

    with psycopg.connect(host="127.0.0.1", port=settings.ports["postgres"], dbname="cdckit", user="postgres",
                         autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        if present:
            conn.execute(f"CREATE TABLE {table} ({BENCH_COLUMNS})")


ORDERS_COLUMNS = ("id int PRIMARY KEY, customer text, email text, amount numeric(12,2), status text, {extra}"
                  "seq bigint, updated_at timestamptz")


def create_orders(dsn: dict, table: str, rows: int, with_items: bool = False) -> None:
    """The freshness benchmarks' table: `rows` orders (with a jsonb of two items when asked), each
    with a `seq` the load bumps. Slots left inactive by earlier runs are dropped first."""
    import psycopg

    items = ("jsonb_build_array(jsonb_build_object('sku', 'A' || g, 'qty', 1, 'price', 9.99), "
             "jsonb_build_object('sku', 'B' || g, 'qty', 2, 'price', 19.5)), ")
    with psycopg.connect(**dsn, autocommit=True) as conn:
        drop_earlier_slots(conn)
        conn.execute(f"CREATE TABLE {table} ({ORDERS_COLUMNS.format(extra='items jsonb, ' if with_items else '')})")
        conn.execute(f"INSERT INTO {table} SELECT g, 'customer ' || g, 'c' || g || '@example.com', g * 1.5, 'open', "
                     f"{items if with_items else ''}0, now() FROM generate_series(1, {rows}) g")


def drop_earlier_slots(conn) -> None:
    """The bench stack's Postgres outlives a run: slots of earlier runs (inactive now) would use up
    max_replication_slots and hold WAL."""
    from connectors import postgres

    for (slot,) in conn.execute("SELECT slot_name FROM pg_replication_slots WHERE NOT active AND slot_name ~ '^f[0-9a-f]{6}$'"
                                ).fetchall():
        postgres.drop_slot(conn, slot)
        postgres.drop_publication(conn, slot)


def job_config(s, dsn: dict, prefix: str, table: str, partitions: int, trigger: str, checkpoint: Path,
               metrics_port: int, heartbeat_ms: int = 1000) -> dict:
    """A `cdckit run` config for one table on the bench stack (heartbeats every second unless told)."""
    return {
        "topic_prefix": prefix, "metrics_port": metrics_port,
        "postgres": {**{k: v for k, v in dsn.items() if k != "dbname"}, "database": "cdckit", "sslmode": "disable",
                     "slot": prefix, "publication": prefix},
        "kafka": {"bootstrap_servers": s.bootstrap_servers, "partitions": partitions},
        "connect": {"url": s.connect_url, "heartbeat_interval_ms": heartbeat_ms, "timeout_s": 30},
        "tables": [{"name": table, "index": prefix, "redis_key": f"{prefix}:{{id}}"}],
        "search": {"kind": "opensearch", "url": s.search_url, "index_settings": {"number_of_replicas": 0}},
        "redis": {"url": s.redis_url},
        "spark": {"checkpoint_dir": str(checkpoint), "trigger": trigger},
    }


def pgbench(dsn: dict, script: Path, rate: int, seconds: float, clients: int = 2) -> float:
    """`script` by `clients` pgbench connections at `rate` transactions per second in all for
    `seconds` (pgbench's own throttle): a C client, so the load costs almost nothing. Returns
    pgbench's CPU seconds (its rusage, reaped here)."""
    import subprocess
    import tempfile

    from pipelines.devstack.packages import postgres_binary

    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([str(postgres_binary("pgbench")), "-n", "-h", dsn["host"], "-p", str(dsn["port"]),
                                 "-U", dsn["user"], "-c", str(clients), "-j", "1", "-R", str(rate),
                                 "-T", str(int(seconds)), "-f", str(script), dsn["dbname"]],
                                stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"pgbench failed (exit {proc.returncode}):\n{err.read()[-2000:].decode(errors='replace')}")
    return usage.ru_utime + usage.ru_stime


def drop_topics(bootstrap: str, topics: list[str]) -> None:
    """A run's topics deleted (one left behind is only disk: said, not raised)."""
    from confluent_kafka.admin import AdminClient

    if not topics:
        return
    admin = AdminClient({"bootstrap.servers": bootstrap})   # held until the futures are done
    for fut in admin.delete_topics(topics).values():
        try:
            fut.result(30)
        except Exception as exc:  # noqa: BLE001 - a topic left behind is only disk
            print(f"  topic not deleted: {exc}", flush=True)


def topics_named(bootstrap: str, keep) -> list[str]:
    """The broker's topics whose name `keep` accepts."""
    from confluent_kafka.admin import AdminClient

    return [t for t in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics if keep(t)]


def unlink_keys(r, pattern: str) -> None:
    """Every Redis key matching `pattern` unlinked, 10,000 at a time."""
    batch = []
    for key in r.scan_iter(match=pattern, count=10_000):
        batch.append(key)
        if len(batch) >= 10_000:
            r.unlink(*batch)
            batch.clear()
    if batch:
        r.unlink(*batch)


def stop_job(job) -> None:
    """A `cdckit run` started by a benchmark (in a session of its own): SIGTERM (it stops after the
    batch in flight), then SIGKILL of its group after a minute."""
    import signal
    import subprocess

    if job is None or job.poll() is not None:
        return
    job.send_signal(signal.SIGTERM)
    try:
        job.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)


def wait_caught_up(bootstrap: str, checkpoint: Path, topic: str, timeout_s: float = 120) -> bool:
    """Until the job's committed offsets reach the topic's end (False when the time is up)."""
    from connectors.kafka.offsets import end_offsets
    from pipelines.state.query_offsets import committed_offsets

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        end = end_offsets({"bootstrap.servers": bootstrap}, [topic]).get(topic, {})
        committed = (committed_offsets(checkpoint) or {}).get(topic, {})
        if all(int(committed.get(p, 0)) >= int(o) for p, o in end.items()):
            return True
        time.sleep(0.25)
    return False


def write_result(name: str, result: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    result = {"benchmark": name, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "machine": {"cpus": os.cpu_count(), "python": platform.python_version()}, **result}
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(result, indent=2))
    print(f"wrote {path}")
    return path


# --- reading documents back the way a search reader sees them ------------------------------------

SEARCH_READS = ("search", "get")


def searched_sources(session, url: str, index: str, ids: list[str], how: str = "search") -> list[tuple[str, dict]]:
    """(id, _source) of the documents with these ids, as a poller of the index reads them.

    "search" (an ids query) sees what a search sees: the engine's last refresh, as a reader of
    the index does. "get" is a realtime multi-get: a document changed since the last refresh makes
    the engine refresh before it answers, so a poller reading hot documents every 50 ms forces up
    to 20 refreshes a second, and the tiny segments they leave keep its merge threads busy (half
    of OpenSearch's CPU in a 2,000 commits/s run on 2 cores): load no production reader adds."""
    if how == "get":
        resp = session.post(f"{url}/{index}/_mget", json={"ids": ids}, timeout=10)
        resp.raise_for_status()
        return [(d["_id"], d["_source"]) for d in resp.json()["docs"] if d.get("found")]
    if how != "search":
        raise ValueError(f"search read {how!r}: one of {', '.join(SEARCH_READS)}")
    resp = session.post(f"{url}/{index}/_search", timeout=10,
                         json={"query": {"ids": {"values": ids}}, "size": len(ids)})
    resp.raise_for_status()
    return [(h["_id"], h["_source"]) for h in resp.json()["hits"]["hits"]]


# --- the search engine's raw bulk rate (rebuild_replay.py, bootstrap_1m.py) -----------------------

def index_documents(url: str, index: str) -> list[tuple[str, bytes]]:
    """(id, source as orjson bytes) of every document of an index or alias, by id (numeric ids in
    numeric order), read with a scroll. Kept as bytes: a million parsed dicts would cost ~1 GB here."""
    import orjson
    import requests

    headers = {"Content-Type": "application/json"}
    resp = requests.post(f"{url}/{index}/_search", params={"scroll": "2m"}, headers=headers, timeout=300,
                         data=orjson.dumps({"size": 5000, "sort": ["_doc"], "query": {"match_all": {}}}))
    resp.raise_for_status()
    page = orjson.loads(resp.content)
    docs: list[tuple[str, bytes]] = []
    scroll_ids = set()
    while page["hits"]["hits"]:
        docs.extend((h["_id"], orjson.dumps(h["_source"])) for h in page["hits"]["hits"])
        scroll_ids.add(page["_scroll_id"])
        resp = requests.post(f"{url}/_search/scroll", headers=headers, timeout=300,
                             data=orjson.dumps({"scroll": "2m", "scroll_id": page["_scroll_id"]}))
        resp.raise_for_status()
        page = orjson.loads(resp.content)
    scroll_ids.add(page.get("_scroll_id"))
    try:
        requests.delete(f"{url}/_search/scroll", headers=headers, timeout=30,
                        data=orjson.dumps({"scroll_id": [i for i in scroll_ids if i]}))
    except requests.RequestException:
        pass  # it expires by itself
    return sorted(docs, key=lambda d: (0, int(d[0]), "") if d[0].isdigit() else (1, 0, d[0]))


def index_definition(url: str, alias: str) -> dict:
    """Mappings and the settings that change indexing (shards, replicas, refresh, analysis) of the
    index behind `alias`, as a create-index body: the raw runs index into the same shape."""
    import requests

    mappings = requests.get(f"{url}/{alias}/_mapping", timeout=30).json()
    concrete, body = next(iter(mappings.items()))
    settings: dict = {"number_of_replicas": 0}
    try:
        index = requests.get(f"{url}/{concrete}/_settings", timeout=30).json()[concrete]["settings"]["index"]
        settings.update({k: index[k] for k in ("number_of_shards", "number_of_replicas", "refresh_interval",
                                               "analysis") if k in index})
    except (KeyError, ValueError, requests.RequestException):
        pass  # an engine without _settings (osmem-server): its defaults
    return {"settings": settings, "mappings": body.get("mappings", {})}


def raw_bulk(url: str, docs: list[tuple[str, bytes]], chunk: int = 5000, definition: dict | None = None) -> dict:
    """The engine alone: plain `index` bulk requests (no versions, no refresh) of the given
    documents, `chunk` per request, one client, bodies built from orjson bytes, into a fresh index
    (created with `definition`, else replicas 0) that is dropped afterwards."""
    import orjson
    import requests

    index = f"raw{uuid.uuid4().hex[:8]}"
    requests.put(f"{url}/{index}", json=definition or {"settings": {"number_of_replicas": 0}},
                 timeout=60).raise_for_status()
    session = requests.Session()
    headers = {"Content-Type": "application/x-ndjson"}
    try:
        t0 = time.perf_counter()
        for start in range(0, len(docs), chunk):
            body = b"".join(b'{"index":{"_id":' + orjson.dumps(doc_id) + b"}}\n" + source + b"\n"
                            for doc_id, source in docs[start:start + chunk])
            resp = session.post(f"{url}/{index}/_bulk", data=body, headers=headers, timeout=300)
            resp.raise_for_status()
            if orjson.loads(resp.content).get("errors"):
                raise RuntimeError(f"raw bulk: items failed: {resp.text[:500]}")
        seconds = time.perf_counter() - t0
    finally:
        session.delete(f"{url}/{index}", timeout=60)
    return {"docs": len(docs), "seconds": round(seconds, 2), "docs_per_s": round(len(docs) / seconds)}


def raw_bulk_sweep(url: str, docs: list[tuple[str, bytes]], chunks=(1000, 2000, 5000),
                   definition: dict | None = None) -> tuple[dict, list[dict]]:
    """raw_bulk at each bulk size; (the best, all of them). The best is the strict baseline."""
    sweep = []
    for chunk in chunks:
        sweep.append({"bulk_chunk": chunk, **raw_bulk(url, docs, chunk, definition)})
        print(f"raw bulk: {json.dumps(sweep[-1])}", flush=True)
    return max(sweep, key=lambda r: r["docs_per_s"]), sweep


# --- peak memory per role of the bench stack and the jobs -----------------------------------------

# Display order; a process is given the first role its command line matches (see _role), else its
# parent's (the bash wrapper of spark-submit, the JVM's helpers...), else "other".
ROLES = ("postgres", "kafka broker", "kafka connect", "opensearch", "osmem", "redis", "cdckit command",
         "spark driver", "python workers", "python worker (max)", "benchmark", "other")
# Roles of many processes that share memory (Postgres' shared_buffers; forked Python workers share
# pages with their daemon): beside the RSS sum, the PSS sum (shared pages counted once).
PSS_ROLES = ("postgres", "python workers")


def _role(argv: list[str]) -> str | None:
    """How pipelines/devstack starts each server (servers.py, search_servers.py) and how Spark
    starts its driver JVM and Python workers."""
    if not argv:
        return None
    exe = os.path.basename(argv[0])
    if "org.apache.spark.deploy.SparkSubmit" in argv:
        return "spark driver"
    if "kafka.Kafka" in argv:
        return "kafka broker"
    if "org.apache.kafka.connect.cli.ConnectDistributed" in argv:
        return "kafka connect"
    if "OpenSearchNode" in argv:
        return "opensearch"
    if "osmem" in exe:
        return "osmem"
    if exe.startswith("redis-server"):
        return "redis"
    if exe == "postgres" or argv[0].startswith("postgres:"):  # the postmaster; its children retitle themselves
        return "postgres"
    if any(a.startswith("pyspark.") or "/pyspark/daemon.py" in a or "/pyspark/worker.py" in a for a in argv[1:]):
        return "python workers"
    # The snapshot bulk's local workers (pipelines/bootstrap/local_tasks.py: spawned by multiprocessing).
    if any("multiprocessing" in a for a in argv[1:]):
        return "python workers"
    return None


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _kb(text: bytes | None, field: bytes) -> int:
    if not text:
        return 0
    at = text.find(field)
    if at < 0:
        return 0
    return int(text[at + len(field):].split(None, 1)[0])


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cores_by_role(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]],
                  seconds: float) -> dict[str, float]:
    """Cores each role kept busy between two RssSampler.cpu_seconds() (a process started in
    between counts whole; one that ended in between is missing), busiest first."""
    used: dict[str, float] = {}
    for pid, (role, cpu) in after.items():
        used[role] = used.get(role, 0.0) + cpu - before.get(pid, (role, 0.0))[1]
    return {role: round(cpu / seconds, 2) for role, cpu in sorted(used.items(), key=lambda kv: -kv[1])}


class RssSampler:
    """Every `interval_s`, in a thread: the RSS (VmRSS, from /proc) of every process of the bench
    stack's servers and of the extra process trees added with add_root (a bootstrap command, a
    `cdckit run`), summed per role; the peak of each role's sum is kept per phase (`with
    sampler.phase("cache"):`). Only the stack's own server processes (from their pid files) and
    their descendants count, so another stack on the machine never does.

        with RssSampler(settings) as sampler:
            sampler.add_root(proc.pid, "spark driver")
            with sampler.phase("run 1"):
                ...
        sampler.peaks["run 1"]["postgres"]  # MB
    """

    def __init__(self, settings=None, interval_s: float = 0.5):
        self.interval_s = interval_s
        self.roots: dict[int, str | None] = {}
        if settings is not None:
            from pipelines.devstack.stack import servers

            for server in servers(settings):
                pid = server.pid()
                if pid is not None:
                    self.roots[pid] = None
        self.peaks: dict[str, dict[str, float]] = {}      # phase -> role -> peak MB (RSS; sums per role)
        self.pss_peaks: dict[str, dict[str, float]] = {}  # phase -> role -> peak MB (PSS sums, PSS_ROLES)
        self.processes: dict[str, dict[str, int]] = {}  # phase -> role -> most processes seen at once
        self.samples: dict[str, int] = {}
        # CPU per phase: each process's time at the phase's start and at its last sample (a process
        # that ended keeps what it had used by then, to within a sample).
        self._cpu_start: dict[int, float] = {}
        self._cpu_last: dict[int, tuple[str, float]] = {}
        self.cpu_s: dict[str, dict[str, float]] = {}   # phase -> role -> CPU seconds used in it
        self.current: str | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)

    def add_root(self, pid: int, role: str | None = None) -> None:
        with self._lock:
            self.roots[pid] = role

    def remove_root(self, pid: int) -> None:
        with self._lock:
            self.roots.pop(pid, None)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = {pid: cpu for pid, (_, cpu) in self.cpu_seconds().items()}
        with self._lock:
            self._cpu_start, self._cpu_last = start, {}
        self.current = name
        self.sample()  # one sample at once: a short phase gets one
        try:
            yield
        finally:
            self.sample()
            self.current = None
            used: dict[str, float] = {}
            with self._lock:
                for pid, (role, cpu) in self._cpu_last.items():
                    used[role] = used.get(role, 0.0) + cpu - self._cpu_start.get(pid, 0.0)
            self.cpu_s[name] = {r: round(v, 1) for r, v in sorted(used.items(), key=lambda kv: -kv[1])}

    def start(self) -> "RssSampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def __enter__(self) -> "RssSampler":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.sample()
            except Exception:  # noqa: BLE001 - a missed sample is fine; the thread must live on
                pass

    def tree(self) -> list[tuple[int, str]]:
        """(pid, role) of every live process of the roots' trees: a root's own role, else the one
        its command line gives, else its parent's."""
        with self._lock:
            roots = dict(self.roots)
        children: dict[int, list[int]] = {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            stat = _read(f"/proc/{name}/stat")
            if stat:
                ppid = int(stat.rsplit(b")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(name))
        out: list[tuple[int, str]] = []
        seen: set[int] = set()
        todo = [(pid, role) for pid, role in roots.items()]
        while todo:
            pid, inherited = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            cmdline = _read(f"/proc/{pid}/cmdline")
            if cmdline is None:
                continue  # gone
            argv = [a.decode(errors="replace") for a in cmdline.split(b"\0") if a]
            role = (roots.get(pid) if pid in roots and roots[pid] else None) or _role(argv) or inherited or "other"
            out.append((pid, role))
            todo.extend((child, role) for child in children.get(pid, ()))
        return out

    def cpu_seconds(self, reaped: bool = False) -> dict[int, tuple[str, float]]:
        """CPU time (user + system) each process of the trees has used so far: pid -> (role, s).
        reaped: with the time of its children that ended and were waited for (cutime + cstime), so
        a role's sum over two samples also counts processes that lived only between them (the
        Postgres backends of a load's connections, reaped by the postmaster)."""
        out = {}
        for pid, role in self.tree():
            stat = _read(f"/proc/{pid}/stat")
            if stat:
                fields = stat.rsplit(b")", 1)[1].split()
                ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if reaped else 0)
                out[pid] = (role, ticks / CLOCK_TICKS)
        return out

    def sample(self) -> None:
        phase = self.current
        if phase is None:
            return
        rss: dict[str, float] = {}
        pss: dict[str, float] = {}
        count: dict[str, int] = {}
        worker_max = 0.0
        for pid, (role, cpu) in self.cpu_seconds().items():
            with self._lock:
                self._cpu_last[pid] = (role, cpu)
            mb = _kb(_read(f"/proc/{pid}/status"), b"VmRSS:") / 1024
            rss[role] = rss.get(role, 0.0) + mb
            count[role] = count.get(role, 0) + 1
            if role in PSS_ROLES:
                pss[role] = pss.get(role, 0.0) + _kb(_read(f"/proc/{pid}/smaps_rollup"), b"\nPss:") / 1024
            if role == "python workers":
                worker_max = max(worker_max, mb)
        if worker_max:
            rss["python worker (max)"] = worker_max
        with self._lock:
            peaks = self.peaks.setdefault(phase, {})
            for role, mb in rss.items():
                peaks[role] = max(peaks.get(role, 0.0), mb)
            pss_peaks = self.pss_peaks.setdefault(phase, {})
            for role, mb in pss.items():
                pss_peaks[role] = max(pss_peaks.get(role, 0.0), mb)
            procs = self.processes.setdefault(phase, {})
            for role, n in count.items():
                procs[role] = max(procs.get(role, 0), n)
            self.samples[phase] = self.samples.get(phase, 0) + 1

    def as_json(self) -> dict:
        """{"rss_peak_mb": {phase: {role: MB}}, "pss_peak_mb": {...}, "samples": {phase: n}}, roles
        in display order."""
        def ordered(d: dict[str, float]) -> dict[str, float]:
            return {r: round(d[r]) for r in sorted(d, key=lambda r: ROLES.index(r) if r in ROLES else len(ROLES))}

        def overall(by_phase: dict[str, dict[str, float]]) -> dict[str, float]:
            out: dict[str, float] = {}
            for peaks in by_phase.values():
                for role, mb in peaks.items():
                    out[role] = max(out.get(role, 0.0), mb)
            return ordered(out)

        return {"rss_peak_mb": {p: ordered(v) for p, v in self.peaks.items()},
                "pss_peak_mb": {p: ordered(v) for p, v in self.pss_peaks.items()},
                "rss_peak_mb_overall": overall(self.peaks), "pss_peak_mb_overall": overall(self.pss_peaks),
                "max_processes": {p: ordered(v) for p, v in self.processes.items()},
                "cpu_s": dict(self.cpu_s), "samples": dict(self.samples), "interval_s": self.interval_s}

    def table(self) -> str:
        """Peak RSS in MB, a row per role, a column per phase; PSS sums in brackets where they differ."""
        phases = list(self.peaks)
        roles = [r for r in ROLES if any(r in self.peaks[p] for p in phases)]
        roles += sorted({r for p in phases for r in self.peaks[p]} - set(roles))
        grid = {}
        for role in roles:
            for p in phases:
                mb = self.peaks[p].get(role)
                cell = "-" if mb is None else f"{mb:,.0f}"
                if mb is not None and role in self.pss_peaks.get(p, {}):
                    cell += f" ({self.pss_peaks[p][role]:,.0f})"
                if mb is not None and self.processes.get(p, {}).get(role, 1) > 1 and role != "python worker (max)":
                    cell += f" x{self.processes[p][role]}"
                grid[role, p] = cell
        width = max([12, *(len(p) + 2 for p in phases), *(len(c) + 2 for c in grid.values())])
        lines = [f"{'peak RSS, MB':<22}" + "".join(f"{p:>{width}}" for p in phases)]
        for role in roles:
            lines.append(f"{role:<22}" + "".join(f"{grid[role, p]:>{width}}" for p in phases))
        if any(self.pss_peaks.get(p) for p in phases):
            lines.append(f"(in brackets: the PSS sum, shared pages counted once; xN: at most N processes at "
                         "once; the RSS sum counts shared pages once per process)")
        for p in phases:
            if self.cpu_s.get(p):
                lines.append(f"CPU s, {p}: " + ", ".join(f"{r} {v:g}" for r, v in self.cpu_s[p].items() if v >= 0.1))
        lines.append(f"(sampled every {self.interval_s:g} s: " +
                     ", ".join(f"{p} {self.samples.get(p, 0)}" for p in phases) + " samples)")
        return "\n".join(lines)
