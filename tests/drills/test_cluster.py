"""The pipeline on a Spark standalone cluster: a master and two workers started from the pyspark
installation (pipelines/devstack/spark_cluster.py), executors in the workers' JVMs, the project's
code reaching them only as the zip the driver ships (the workers' Python lacks cdckit, and every
cdckit process runs outside the checkout, so no working directory lends the code). Sync under
load with a worker killed with -9 mid-batch (its executor and Python workers with it), a worker
added while running, the driver killed with -9 and restarted; a rebuild beside the live job, its
progress reported by tasks on the executors through Kafka. Every store ends equal to Postgres."""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.support.drills import Workload, converged, record
from tests.support.integration import (batch_in_flight, batches_committed, cli, create_simple_table, diff_stores,
                                       drop_connector, start_job, wait_batches, wait_for, wait_group_gone,
                                       wait_streaming,
                                       write_config)

pytestmark = [pytest.mark.integration, pytest.mark.drill, pytest.mark.cluster]


@pytest.fixture(scope="module")
def cluster(stack):
    """The stack's Spark master and two workers, for this module."""
    if stack.world != "devstack":
        pytest.skip("the Spark cluster is part of the local stack")
    from pipelines.devstack import processes
    from pipelines.devstack.spark_cluster import cluster_servers, worker_python

    settings = dataclasses.replace(stack.settings, spark_cluster=True)
    servers = cluster_servers(settings)
    for server in servers:
        if server.pid() is None:
            server.start()
        assert processes.wait_until(server.healthy, 120), processes.log_tail(server.log)
    yield settings, worker_python(settings)
    for server in reversed(servers):
        server.stop()


def cluster_config(stack, cluster, tmp_path: Path, name: str, **spark):
    settings, python = cluster
    table = f"public.{name}"
    conf = {"spark.pyspark.python": str(python), **spark.pop("conf", {})}
    return stack.config(
        tables=[{"name": table, "redis_key": f"{name}:{{id}}", "index": name}],
        kafka={"bootstrap_servers": stack.bootstrap_servers, "partitions": 6,
               "topic_config": {"segment.ms": 2000, "min.cleanable.dirty.ratio": 0.01, "min.compaction.lag.ms": 0}},
        spark={"master": settings.spark_master_url, "checkpoint_dir": str(tmp_path / "ckpt"), "trigger": "500 ms",
               "conf": conf, **spark},
        metrics_port=0)


def ancestors(pid: int) -> list[int]:
    out = []
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        out.append(pid)
    return out


def python_workers_under(worker_pid: int) -> list[int]:
    """Spark's Python workers (pyspark.daemon and its forks) whose ancestors include the worker JVM."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(b"pyspark.daemon" in a or b"pyspark.worker" in a for a in argv) and worker_pid in ancestors(
                int(entry.name)):
            found.append(int(entry.name))
    return found


def executor_apps(worker) -> set[str]:
    return {p.name for p in worker.work_dir.glob("app-*")}


def test_sync_on_the_cluster_through_a_worker_kill_a_new_worker_and_a_driver_kill(stack, cluster, tmp_path):
    from pipelines.devstack import processes
    from pipelines.devstack.spark_cluster import SparkWorker

    settings, _ = cluster
    name = f"cl_{uuid.uuid4().hex[:6]}"
    table = f"public.{name}"
    create_simple_table(stack, table, 6000)
    data = cluster_config(stack, cluster, tmp_path, name, max_offsets_per_trigger=3000)
    path = write_config(tmp_path, data)
    ckpt = tmp_path / "ckpt"
    log = tmp_path / "job.log"
    first, second = SparkWorker(settings, 1), SparkWorker(settings, 2)
    added = SparkWorker(settings, 3)
    job, load = None, Workload(stack, table, 6000, tx_per_s=30)
    try:
        assert cli("connector", "apply", "-c", str(path)).returncode == 0
        wait_streaming(stack, data)
        job = start_job(path, log, cwd=tmp_path)
        load.start()
        # Executors in the workers' JVMs, the tasks' Python workers under them. (The driver has
        # Python workers of its own too: Spark plans a Python data source's batches there.)
        wait_for(lambda: python_workers_under(first.pid()) and python_workers_under(second.pid()), 180, 0.5,
                 "Python workers under both Spark workers")
        assert executor_apps(first) and executor_apps(second)

        wait_for(lambda: batch_in_flight(ckpt / "query") or job.poll() is not None, 180, 0.05, "a batch in flight")
        assert job.poll() is None, log.read_text()[-3000:]
        victim = first.pid()
        os.killpg(victim, signal.SIGKILL)  # the worker, its executor JVM and their Python workers
        wait_for(lambda: not processes.alive(victim), 30, 0.2, "the worker gone")
        first.pid_file.unlink(missing_ok=True)
        # The job goes on with the other worker: the lost tasks rerun there and later batches commit.
        after_kill = batches_committed(ckpt)
        wait_batches(ckpt, after_kill + 2, job, log, 240, "batches committed on the remaining worker")
        written_at_kill = load.written
        added.start()
        wait_for(added.healthy, 120, 1, "a third worker registered")
        wait_for(lambda: executor_apps(added), 120, 1, "the running job's executor on the added worker")
        wait_for(lambda: python_workers_under(added.pid()), 120, 0.5, "tasks on the added worker")
        with_added = batches_committed(ckpt)
        wait_batches(ckpt, with_added + 1, job, log, 120, "a batch committed with the added worker")

        wait_for(lambda: batch_in_flight(ckpt / "query") or job.poll() is not None, 180, 0.05, "a batch in flight")
        os.killpg(job.pid, signal.SIGKILL)  # the driver: Python and its JVM
        job.wait()
        wait_group_gone(job.pid)  # the JVM lingers a moment after kill -9
        restarted_from = batches_committed(ckpt)
        job = start_job(path, log, cwd=tmp_path)
        # The master frees the dead app's executors; the new one gets its own and carries live changes.
        wait_batches(ckpt, restarted_from + 3, job, log, 300, "batches committed after the driver's restart")
        load.stop()
        result = converged(stack, table, f"{name}:", name, load.deleted, timeout_s=240)
        record("kill -9 Spark worker mid-batch (cluster)", written_at_kill, result)
        record("Spark worker added while running (cluster)", load.written - written_at_kill, result)
        record("kill -9 Spark driver mid-batch (cluster)", load.written, result)
        assert not any(result.values()), result
        assert not any(diff_stores(stack, table, f"{name}:", name).values())
        verify = cli("verify", "-c", str(path), "--json", timeout=300, cwd=tmp_path)
        assert verify.returncode == 0, verify.stdout[-2000:] + verify.stderr[-2000:]
        job.send_signal(signal.SIGTERM)
        assert job.wait(timeout=90) == 0, log.read_text()[-3000:]
        job = None
    finally:
        load.stop_flag.set()
        if job is not None:
            os.killpg(job.pid, signal.SIGKILL)
        added.stop()
        if first.pid() is None:  # back to two workers for the next test
            first.start()
            processes.wait_until(first.healthy, 120)
        drop_connector(stack, data)


def test_bootstrap_then_a_rebuild_beside_the_live_job_on_the_cluster(stack, cluster, tmp_path):
    """`bootstrap --once`, then the live job and a rebuild under load. Each app capped at one core
    (spark.cores.max), so the rebuild finds an executor while the live job holds the other; the bulk
    tasks' progress is read from Kafka while they run."""
    from pipelines.state import rebuild_state
    name = f"clr_{uuid.uuid4().hex[:6]}"
    table = f"public.{name}"
    create_simple_table(stack, table, 60000)
    data = cluster_config(stack, cluster, tmp_path, name, conf={"spark.cores.max": "1"})
    path = write_config(tmp_path, data)
    ckpt = tmp_path / "ckpt"
    job, load = None, Workload(stack, table, 60000, tx_per_s=20)
    seen: list[dict] = []
    errors: list[str] = []
    stop_watch = threading.Event()

    def watch_progress():
        from pipelines.config import load_config

        cfg = load_config(path)
        while not stop_watch.is_set():
            try:   # a failed read is kept, not the watcher's silent end ("the bars did not move")
                state = rebuild_state.load(ckpt)
                if state is not None and state.phase == "bulk":
                    board = rebuild_state.progress_board(cfg.kafka.client_config(), state.plan["rebuild_id"])
                    try:
                        seen.append(board.read(rebuild_state.plan_partitions(state.plan["end"]), timeout_s=1))
                    finally:
                        board.close()
            except Exception as exc:  # noqa: BLE001
                errors.append(repr(exc))
            time.sleep(0.3)

    watcher = threading.Thread(target=watch_progress, daemon=True)
    try:
        # The snapshot by `cdckit bootstrap` on the cluster, then the live job.
        boot = cli("bootstrap", "--once", "-c", str(path), timeout=600, cwd=tmp_path)
        assert boot.returncode == 0, boot.stdout[-3000:] + boot.stderr[-3000:]
        assert not any(diff_stores(stack, table, f"{name}:", name).values())
        job = start_job(path, tmp_path / "job.log", cwd=tmp_path)
        load.start()
        watcher.start()
        result = cli("rebuild", "all", "-c", str(path), "--json", timeout=900, cwd=tmp_path)
        stop_watch.set()
        watcher.join()
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        summary = json.loads(result.stdout)["summary"]
        assert summary["old_generation"] == "dropped"
        # The bars moved: partitions finished one after another while others were still running.
        done_counts = sorted({sum(1 for v in s.values() if v.get("done")) for s in seen})
        assert len([c for c in done_counts if 0 < c < 6]) >= 1, (done_counts, errors[-3:])
        load.stop()
        outcome = converged(stack, table, f"{name}:", name, load.deleted, timeout_s=240)
        record("rebuild all beside the live job (cluster)", load.written, outcome)
        assert not any(outcome.values()), outcome
    finally:
        stop_watch.set()
        load.stop_flag.set()
        if job is not None:
            os.killpg(job.pid, signal.SIGKILL)
        drop_connector(stack, data)


def test_spark_submit_runs_cdckit_from_its_package(stack, cluster, tmp_path):
    """`cdckit spark-package` + spark-submit, as on YARN or Kubernetes: the driver's Python is the
    workers' (no cdckit installed), so the code comes from --py-files alone, on the driver too."""
    import subprocess
    import sys

    from pipelines.devstack.spark_cluster import spark_env, spark_home
    from tests.support.integration import assert_exact

    settings, python = cluster
    name = f"cls_{uuid.uuid4().hex[:6]}"
    table = f"public.{name}"
    create_simple_table(stack, table, 3000)
    data = cluster_config(stack, cluster, tmp_path, name, trigger="available_now")
    data["spark"]["master"] = "local[1]"  # spark-submit's --master wins
    path = write_config(tmp_path, data)
    package = subprocess.run([sys.executable, "-m", "pipelines.cli", "spark-package", str(tmp_path / "dist")],
                             capture_output=True, text=True, timeout=60)
    assert package.returncode == 0, package.stderr
    archive = next((tmp_path / "dist").glob("cdckit-*.zip"))
    try:
        assert cli("connector", "apply", "-c", str(path)).returncode == 0
        wait_streaming(stack, data)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env.update(spark_env(), PYSPARK_PYTHON=str(python), PYSPARK_DRIVER_PYTHON=str(python))
        submit = subprocess.run([str(spark_home() / "bin" / "spark-submit"), "--master", settings.spark_master_url,
                                 "--py-files", str(archive), str(tmp_path / "dist" / "cdckit_submit.py"),
                                 "run", "-c", str(path)], capture_output=True, text=True, timeout=600,
                                cwd=tmp_path, env=env)
        assert submit.returncode == 0, submit.stdout[-3000:] + submit.stderr[-3000:]
        assert_exact(stack, table, f"{name}:", name, timeout_s=60)
        assert (tmp_path / "ckpt" / "query" / "commits").exists()
    finally:
        drop_connector(stack, data)
