"""Issue #4: bootstrap with progress (killed mid-way and rerun: still exact), `snapshot add` of a
second table under write load, and `status --json` in known states."""
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
import redis

from tests.support.integration import (assert_exact, cli, cli_json, create_simple_table, diff_stores, drop_connector,
                                       pg, stores_exact, wait_for, wait_group_gone, write_config)
from pipelines.state.status_file import read_status
from tests.support.stack import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.drill]
# Enough rows for several bulk rounds (a quarter per trigger) and a kill between them.
BOOT_ROWS = 60_000


def cdckit(*args: str, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1", "COLUMNS": "120"}
    return subprocess.Popen([sys.executable, "-m", "pipelines.cli", *args], cwd=ROOT, env=env,
                            stdout=open(log, "ab"), stderr=subprocess.STDOUT, start_new_session=True)


def kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        wait_group_gone(proc.pid)  # the JVM lingers a moment after kill -9


def refresh_intervals(stack, alias: str) -> list:
    """The refresh_interval setting of each index behind the alias (None: not set)."""
    import requests

    body = requests.get(f"{stack.search_url}/{alias}/_settings", params={"flat_settings": "true"}, timeout=10).json()
    return [v["settings"].get("index.refresh_interval") for v in body.values()]


def test_bootstrap_killed_midway_then_rerun_is_exact(stack, tmp_path):
    name = f"boot_{uuid.uuid4().hex[:6]}"
    table = f"public.{name}"
    create_simple_table(stack, table, BOOT_ROWS)
    ckpt = tmp_path / "ckpt"
    data = stack.config(tables=[{"name": table, "redis_key": f"{name}:{{id}}", "index": name}],
                        spark={"checkpoint_dir": str(ckpt), "max_offsets_per_trigger": BOOT_ROWS // 4}, metrics_port=0)
    path = write_config(tmp_path, data)
    log = tmp_path / "bootstrap.log"
    try:
        first = cdckit("bootstrap", "--once", "-c", str(path), log=log)
        # Killed while the bulk writes the snapshot reads (some rows in the stores, not all).
        r = redis.Redis.from_url(stack.redis_url)
        wait_for(lambda: any(True for _ in r.scan_iter(f"{name}:*", count=1000)) or first.poll() is not None,
                 300, 0.05, "the bulk's first writes")
        assert first.poll() is None, log.read_text()[-2000:]
        kill(first)
        assert not (ckpt / "cdckit-bootstrap.json").exists()
        # The load paused the index's refreshes (a large snapshot is not searched until synced); the
        # crash left them paused, and the next start resumes them before anything else.
        assert refresh_intervals(stack, name) == ["-1"]
        second = cdckit("bootstrap", "--once", "-c", str(path), log=log)
        assert second.wait(timeout=400) == 0, log.read_text()[-3000:]
        state = json.loads((ckpt / "cdckit-bootstrap.json").read_text())
        assert state["detected_by"].startswith("bulk apply") and state["snapshot_lsn"] > 0
        # The streaming query takes over after the snapshot's reads: every one of them, no more.
        assert sum(state["offsets"][f"{data['topic_prefix']}.{table}"].values()) == BOOT_ROWS
        text = log.read_text()
        assert f"{BOOT_ROWS:,}/{BOOT_ROWS:,}" in text and "rows/s" in text
        assert "refreshes paused by an interrupted snapshot load, restored" in text
        assert refresh_intervals(stack, name) == [None]   # the engine's default again, as configured
        assert not any(diff_stores(stack, table, f"{name}:", name).values())
        # Run again: nothing to do, and it says so.
        again = cli("bootstrap", "--once", "-c", str(path))
        assert again.returncode == 0 and "already bootstrapped" in again.stdout
    finally:
        drop_connector(stack, data)


def test_snapshot_add_under_load_and_status_states(stack, tmp_path):
    name = f"add_{uuid.uuid4().hex[:6]}"
    first, second = f"public.{name}_a", f"public.{name}_b"
    create_simple_table(stack, first, 2_000)
    create_simple_table(stack, second, 5_000)
    ckpt = tmp_path / "ckpt"
    tables = [{"name": first, "redis_key": f"{name}_a:{{id}}", "index": f"{name}_a"}]
    data = stack.config(tables=tables, spark={"checkpoint_dir": str(ckpt), "trigger": "500 ms"}, metrics_port=0)
    path = write_config(tmp_path, data)
    log = tmp_path / "run.log"
    stop = threading.Event()

    def load():
        with pg(stack) as conn:
            i = 0
            while not stop.is_set():
                i += 1
                conn.execute(f"UPDATE {first} SET n = n + 1 WHERE id = %s", (i % 2000 + 1,))
                conn.execute(f"UPDATE {second} SET n = n + 1 WHERE id = %s", (i % 5000 + 1,))
                if i % 10 == 0:
                    conn.execute(f"DELETE FROM {second} WHERE id = %s", (i % 5000 + 1,))
                time.sleep(0.005)

    run = None
    try:
        assert cli("bootstrap", "--once", "-c", str(path)).returncode == 0
        run = cdckit("run", "-c", str(path), log=log)
        wait_for(lambda: stores_exact(stack, first, f"{name}_a:", f"{name}_a"), 120, 1, "first table synced")
        # `status` judges the pipeline process named in the status file: `run` names itself when it starts
        # (no batch needed: the database is idle here).
        wait_for(lambda: (read_status(ckpt) or {}).get("pid") == run.pid, 60, 0.5, "run named in the status file")

        healthy, report = cli_json("status", "-c", str(path))
        assert healthy.returncode == 0, report["problems"]
        assert report["healthy"] and report["slot"]["active"] and report["connector"]["state"] == "RUNNING"
        topic = f"{data['topic_prefix']}.{first}"
        assert report["topics"][topic]["cleanup_policy"] == "compact" and report["topics"][topic]["lag"] == 0
        assert report["tables"][first]["search_docs"] == 2_000 and report["tables"][first]["cache_keys"] == 2_000

        writer = threading.Thread(target=load, daemon=True)
        writer.start()
        data["tables"].append({"name": second, "redis_key": f"{name}_b:{{id}}", "index": f"{name}_b"})
        write_config(tmp_path, data)  # the running job re-reads it
        added = cli("snapshot", "add", second, "-c", str(path), timeout=600)
        assert added.returncode == 0, added.stdout + added.stderr
        assert "incremental snapshot done" in added.stdout
        stop.set()
        writer.join()
        for table, prefix in ((first, f"{name}_a"), (second, f"{name}_b")):
            assert_exact(stack, table, f"{prefix}:", prefix)

        # Lagging: the pipeline stopped while writes continue.
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=60) == 0
        run = None
        stop.clear()
        writer = threading.Thread(target=load, daemon=True)
        writer.start()
        # status samples the lag twice, 2 s apart: asked again while Connect has delivered nothing in between
        for _ in range(10):
            lagging = cli("status", "--json", "-c", str(path))
            report = json.loads(lagging.stdout)
            if lagging.returncode == 1 and report["topics"][topic]["lag_growing"]:
                break
        stop.set()
        writer.join()
        assert lagging.returncode == 1 and report["topics"][topic]["lag_growing"], report
        assert any("lag" in p and "growing" in p for p in report["problems"])

        # Stopped connector (its task shut down) and, with it, an inactive slot.
        assert cli("connector", "stop", "-c", str(path)).returncode == 0
        wait_for(lambda: not json.loads(cli("status", "--json", "-c", str(path)).stdout)["slot"]["active"], 60, 1,
                 "slot inactive")
        paused = cli("status", "--json", "-c", str(path))
        report = json.loads(paused.stdout)
        assert paused.returncode == 1
        assert report["connector"]["state"] == "STOPPED" and report["slot"]["active"] is False
        assert any("inactive" in p for p in report["problems"])
        assert any("STOPPED" in p for p in report["problems"])
    finally:
        stop.set()
        if run is not None:
            kill(run)
        drop_connector(stack, data)
