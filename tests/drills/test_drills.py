"""Fault drills on the real stack: a write workload runs, a fault is injected, the system recovers
(by itself, or by the documented command), and then the stores equal Postgres: nothing lost, nothing
stale, nothing resurrected, and `cdckit verify` agrees. Results: tests/support/drills.py -> scripts/drills.

The drills share one pipeline (table, connector, job) and run one after another in this file's
order: each starts from the state the previous one left, converged and verified, which is what an
operator's pipeline lives through. The destructive ones come last (a TRUNCATE, lost topics).
Waits are on the condition a pause stood for (changes written, batches committed after a fault)."""
from __future__ import annotations

import dataclasses
import itertools
import json
import os
import signal
import time
import uuid
from pathlib import Path

import pytest
import redis

from tests.support.drills import Workload, converged, record
from tests.support.integration import (batches_committed, cli, cli_json, diff_stores, drop_connector, fresh_redis_dbs,
                                       key_history, pg, start_job, wait_batches, wait_for, wait_streaming,
                                       write_config)

pytestmark = [pytest.mark.integration, pytest.mark.drill]
LIVE_DB, SPARE_DB = 7, 8
ROWS = 2000
# The stores' client timeouts a freeze exercises (search.timeout_s, redis.timeout_s: the drills'
# config sets them below their defaults of 30 s and 10 s): a freeze lasts one second longer, no more.
TIMEOUT_S = {"search": 12, "redis": 5}
FREEZE_S = {store: seconds + 1 for store, seconds in TIMEOUT_S.items()}
_workloads = itertools.count(1)


def server(stack, name):
    from pipelines.devstack import stack as devstack

    if stack.settings is None:
        pytest.skip("drills need the local stack's processes")
    return next(s for s in devstack.servers(stack.settings) if s.name == name)


def restart(stack, name):
    from pipelines.devstack import stack as devstack

    server(stack, name).stop()
    devstack.up(stack.settings, say=lambda _: None)


def lose_data(stack, name):
    """The server comes back empty (a lost disk, a fresh node). The search engine loses every index
    through its API instead of a restart from an empty home: cdckit keeps nothing else there (no
    templates, scripts or cluster settings), so what it finds is the same, without a JVM's minute
    of start-up on two cores; unreachability is the freeze drill's."""
    import shutil

    import requests

    from pipelines.devstack import stack as devstack

    if name == "search":
        gone = requests.delete(f"{stack.search_url}/*", timeout=60)
        assert gone.status_code == 200, gone.text
        left = requests.get(f"{stack.search_url}/_cat/indices?format=json", timeout=10).json()
        assert [i["index"] for i in left if not i["index"].startswith(".")] == [], left
        return
    s = server(stack, name)
    s.stop()
    shutil.rmtree(s.home, ignore_errors=True)
    devstack.up(stack.settings, say=lambda _: None)


@dataclasses.dataclass
class Drill:
    stack: object           # Endpoints with the drill's own Redis database
    name: str
    table: str
    path: str
    data: dict
    ckpt: Path
    job: object = None
    log: object = None
    workloads: list = dataclasses.field(default_factory=list)

    def start_job(self):
        self.job = start_job(self.path, self.log)

    def workload(self) -> Workload:
        """A workload whose inserted ids no earlier drill's workload used."""
        w = Workload(self.stack, self.table, ROWS, first_new_id=next(_workloads) * 1_000_000).start()
        self.workloads.append(w)
        return w

    def written(self, w: Workload, changes: int = 150, timeout_s: float = 120) -> None:
        """Until the workload wrote `changes` more changes (a pause before a fault stood for this)."""
        target = w.written + changes
        wait_for(lambda: w.written >= target, timeout_s, 0.1, f"{changes} changes written")

    def applied(self, w: Workload, batches: int = 2, timeout_s: float = 240) -> None:
        """Until the job committed `batches` batches after the workload wrote more changes from now:
        the recovered pipeline has carried live changes (a pause after a recovery stood for this)."""
        self.written(w)
        wait_batches(self.ckpt, batches_committed(self.ckpt) + batches, self.job, self.log, timeout_s,
                     f"{batches} batches committed")

    def converge(self, workload: Workload, drill: str, also: str | None = None, **extra):
        """`also`: a second drill row this one recovery stands for."""
        result = converged(self.stack, self.table, f"{self.name}:", self.name, workload.deleted)
        verify = cli("verify", "--json", "-c", self.path, timeout=300)
        result["verify_exact"] = verify.returncode == 0
        for name in (drill, also) if also else (drill,):
            record(name, workload.written, result, **extra)
        if result != {"lost": 0, "stale": 0, "resurrected": 0, "other_extra": 0, "verify_exact": True}:
            diff = {k: v[:5] for k, v in diff_stores(self.stack, self.table, f"{self.name}:", self.name).items() if v}
            history = _key_history(self, [k for v in diff.values() for k in v][:3])
            raise AssertionError((result, diff, history, verify.stdout[-2000:], self.log.read_text()[-3000:]))


def _key_history(d: Drill, ids: list[str]) -> dict:
    return key_history(d.stack.bootstrap_servers, f"{d.data['topic_prefix']}.{d.table}", {(int(i),) for i in ids})


@pytest.fixture(scope="module")
def shared(stack, tmp_path_factory):
    """One pipeline for every drill of this module: a table, its connector and a running job."""
    tmp_path = tmp_path_factory.mktemp("drills")
    name = f"dr_{uuid.uuid4().hex[:6]}"
    table = f"public.{name}"
    own = fresh_redis_dbs(stack, LIVE_DB, SPARE_DB)
    with pg(stack) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, name text, n int)")
        conn.execute(f"INSERT INTO {table} SELECT g, 'r' || g, 0 FROM generate_series(1, {ROWS}) g")
    ckpt = tmp_path / "ckpt"
    data = stack.config(tables=[{"name": table, "redis_key": f"{name}:{{id}}", "index": name}],
                        redis={"url": own.redis_url, "rebuild_db": SPARE_DB, "timeout_s": TIMEOUT_S["redis"]},
                        spark={"checkpoint_dir": str(ckpt), "trigger": "500 ms"}, metrics_port=0)
    data["search"]["timeout_s"] = TIMEOUT_S["search"]
    d = Drill(own, name, table, str(write_config(tmp_path, data)), data, ckpt, log=tmp_path / "job.log")
    try:
        assert cli("connector", "apply", "-c", d.path).returncode == 0
        wait_streaming(stack, data)
        d.start_job()
        r = redis.Redis.from_url(own.redis_url)
        wait_for(lambda: sum(1 for _ in r.scan_iter(match=f"{name}:*", count=1000)) >= ROWS, 180, 1,
                 "the snapshot applied")
        yield d
    finally:
        if d.job is not None and d.job.poll() is None:
            os.killpg(d.job.pid, signal.SIGKILL)
        try:
            drop_connector(stack, data)
        except Exception as exc:  # noqa: BLE001 - keep the drill's own failure visible
            print(f"cleanup: {exc}")


@pytest.fixture
def drill(shared):
    """The shared pipeline, its job running (a drill that failed may have left it stopped)."""
    if shared.job is None or shared.job.poll() is not None:
        shared.start_job()
    yield shared
    # A drill that failed before stopping its workload: its writes would go on under every later
    # drill (none of them would converge while it writes).
    for w in shared.workloads:
        w.stop()
    shared.workloads.clear()


def test_kill_connect_worker_mid_stream(stack, drill):
    from pipelines.devstack import stack as devstack

    w = drill.workload()
    drill.written(w)
    connect = server(stack, "connect")
    os.kill(connect.pid(), signal.SIGKILL)
    wait_for(lambda: connect.pid() is None, 30, 0.2, "the worker gone")
    devstack.up(stack.settings, say=lambda _: None)  # the worker comes back; the task resumes from its offsets
    wait_streaming(stack, drill.data, timeout_s=120)
    drill.applied(w)
    w.stop()
    drill.converge(w, "kill -9 Kafka Connect worker")


@pytest.mark.parametrize("store", ["search", "redis"])
def test_store_frozen_past_its_client_timeout(stack, drill, store):
    w = drill.workload()
    drill.written(w)
    pid = server(stack, store).pid()
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(FREEZE_S[store])  # the fault itself: as long as the client timeout it exercises
    finally:
        os.kill(pid, signal.SIGCONT)
    drill.applied(w)  # it waited; it did not die
    w.stop()
    drill.converge(w, f"{store} unreachable {FREEZE_S[store]} s (SIGSTOP)")


def test_postgres_restarted(stack, drill):
    w = drill.workload()
    drill.written(w)
    restart(stack, "postgres")
    wait_streaming(stack, drill.data, timeout_s=180)  # Debezium reconnects by itself
    drill.applied(w)
    w.stop()
    assert w.errors > 0  # the workload did see the database go away
    drill.converge(w, "Postgres restarted")


def test_broker_restarted_under_load_loses_nothing(stack, drill):
    """Apache Kafka keeps its log on disk: the topics survive, Connect's producer and the job's
    reads wait for the broker (the job restarts its query when a batch fails on it)."""
    w = drill.workload()
    drill.written(w)
    restart(stack, "kafka")
    drill.applied(w)
    w.stop()
    drill.converge(w, "broker restarted under load")


@pytest.mark.parametrize("store,server_name", [("search", "search"), ("cache", "redis")])
def test_store_lost_its_data_detected_then_rebuilt(stack, drill, store, server_name):
    """The cache's rebuild is also the kill-after-switch drill: SWAPDB done, the rebuild's state not
    yet written, the process killed; the rerun must not swap back (serving the old generation, then
    flushing the new one): it finds its generation live and finishes. Both rows from one recovery."""
    w = drill.workload()
    drill.written(w)
    lose_data(stack, server_name)
    status, report = cli_json("status", "-c", drill.path, timeout=120)
    assert status.returncode == 1 and report["stores_lost"] == [store], status.stdout[-2000:]
    if store == "cache":
        killed = cli("rebuild", "cache", "-c", drill.path, env={"CDCKIT_CRASH_AT": "rebuild.after_switch"},
                     timeout=600)
        assert killed.returncode == -signal.SIGKILL, killed.stdout[-2000:] + killed.stderr[-2000:]
    rebuilt = cli("rebuild", store, "-c", drill.path, timeout=600)
    assert rebuilt.returncode == 0, rebuilt.stdout[-2000:] + rebuilt.stderr[-2000:]
    drill.applied(w)
    w.stop()
    drill.converge(w, f"{store} lost its data, rebuilt",
                   also="cache rebuild killed after its switch, rerun" if store == "cache" else None)
    assert cli("status", "--json", "-c", drill.path, timeout=120).returncode == 0


def test_job_behind_a_compacted_log_applies_tombstones_without_their_delete(stack, drill):
    """A job that lags behind the log cleaner reads deleted keys as a tombstone whose op=d record
    was compacted away: the rows must still leave both stores."""
    from tests.support.integration import read_topic_to_end

    os.killpg(drill.job.pid, signal.SIGTERM)
    drill.job.wait(timeout=60)
    w = drill.workload()
    # Deletes while the job is stopped, of rows that are there: forty at once, rather than waiting
    # for the workload's one delete per transaction to reach twenty (most of this drill's time when
    # every workload drew the same, already deleted, victims).
    with pg(stack) as conn:
        gone = {str(i) for (i,) in conn.execute(
            f"DELETE FROM {drill.table} WHERE id IN (SELECT id FROM {drill.table} ORDER BY id LIMIT 40) "
            "RETURNING id").fetchall()}
    w.deleted.update(gone)
    topic = f"{drill.data['topic_prefix']}.{drill.table}"

    def tombstones_only() -> int:
        records = read_topic_to_end(stack.bootstrap_servers, topic)
        ops: dict[str, list] = {}
        for k, v in records:
            ops.setdefault(str(k["id"]), []).append(None if v is None else v["op"])
        return sum(1 for i in list(w.deleted) if ops.get(i) == [None])  # a copy: the workload adds to it

    compacted = wait_for(lambda: (n := tombstones_only()) >= 20 and n, 180, 2, "deleted rows compacted to their tombstone")
    w.stop()
    drill.start_job()
    drill.converge(w, "job behind a compacted log (tombstones only)", tombstones_only=compacted)


def test_truncate_under_load_then_rebuild_all(stack, drill):
    """TRUNCATE with three partitions per topic: the truncate's marker lands in one partition of its
    own topic, the rows it removes are in all of the table's; the live job cuts them once every task
    of the batch wrote, the rebuild folds every partition from the cut."""
    w = drill.workload()
    drill.written(w)
    with pg(stack) as conn:
        with conn.transaction():
            conn.execute(f"TRUNCATE {drill.table}")
            conn.execute(f"INSERT INTO {drill.table} SELECT g, 'again', 0 FROM generate_series(1, 300) g")
    drill.applied(w)
    rebuilt = cli("rebuild", "all", "-c", drill.path, timeout=600)
    assert rebuilt.returncode == 0, rebuilt.stdout[-2000:] + rebuilt.stderr[-2000:]
    drill.applied(w)
    w.stop()
    drill.converge(w, "TRUNCATE under load (3 partitions), rebuild all")


def test_topics_deleted_recovered_by_resnapshot(stack, drill, tmp_path):
    """Someone deleted the change topics (or the broker lost its data). The running pipeline stops
    with a message naming the recovery; `cdckit bootstrap` sets the checkpoint aside,
    re-snapshots, and removes what the new snapshot did not rewrite. Last: the job is gone after it."""
    from confluent_kafka.admin import AdminClient

    from pipelines.bootstrap.steps import state_path
    from pipelines.config import load_config

    w = drill.workload()
    drill.written(w)
    admin = AdminClient({"bootstrap.servers": stack.bootstrap_servers})
    prefix = drill.data["topic_prefix"] + "."
    doomed = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix) and t != prefix + "dlq"]
    for fut in admin.delete_topics(doomed).values():
        fut.result(30)
    assert drill.job.wait(timeout=120) == 5  # StateLost: the topics it builds on are gone
    assert "cdckit bootstrap" in drill.log.read_text()
    # Deletes happen while no topic exists: the snapshot will not carry them. Twenty rows that are
    # there, beside the workload's own (whose victims the earlier drills' workloads mostly took).
    with pg(stack) as conn:
        w.deleted.update(str(i) for (i,) in conn.execute(
            f"DELETE FROM {drill.table} WHERE id IN (SELECT id FROM {drill.table} ORDER BY id LIMIT 20) "
            "RETURNING id").fetchall())
    boot = start_job(drill.path, tmp_path / "bootstrap.log", command="bootstrap")
    try:
        cfg = load_config(drill.path)
        wait_for(lambda: state_path(cfg).exists() or boot.poll() is not None, 240, 1, "the re-snapshot")
        assert boot.poll() is None, ((tmp_path / "bootstrap.log").read_text()[-3000:]
                                     + stack.settings.log("connect").read_text()[-4000:])
        drill.job, drill.log = boot, tmp_path / "bootstrap.log"
        drill.applied(w)
        w.stop()
        state = json.loads(state_path(cfg).read_text())
        assert "removed_after_lost_topics" in state
        drill.converge(w, "change topics deleted, re-snapshot", removed=sum(
            state["removed_after_lost_topics"].values()))
    finally:
        if boot.poll() is None:
            os.killpg(boot.pid, signal.SIGKILL)
