"""`cdckit bootstrap --once` of a snapshot applied by local worker processes (Spark's master local,
more rows than the command applies itself): no Spark session, the command killed -9 while its
workers write a round, its workers gone after it, and a rerun that resumes to stores exactly equal
to the table (`cdckit verify`). The command runs with IN_PROCESS_ROWS at 0, so a table of a test's size takes that path."""
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from pipelines.state.bootstrap_state import read_bulk
from tests.support.integration import ROOT, cli, drop_pipeline, pg, process_running, wait_for, write_config

pytestmark = pytest.mark.integration

ROWS = 150_000
BOOTSTRAP = ("import sys\nimport pipelines.bootstrap.bootstrap_bulk as bulk\nbulk.IN_PROCESS_ROWS = 0\n"
             "from pipelines.cli.main import entry\nsys.argv[0] = 'cdckit'\nentry()\n")


def _bootstrap(path, log) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", BOOTSTRAP, "bootstrap", "--once", "-c", str(path)], cwd=ROOT,
                            stdout=open(log, "ab"), stderr=subprocess.STDOUT, start_new_session=True)


def _workers(pid: int) -> list[int]:
    """The command's local workers (spawned by multiprocessing, children of the command)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if ppid == pid and b"multiprocessing.spawn" in cmdline:
            out.append(int(name))
    return out


def test_a_large_snapshot_through_local_workers_survives_a_kill_mid_bulk(stack, tmp_path):
    name = f"lw_{uuid.uuid4().hex[:6]}"
    table = f"public.{name}"
    with pg(stack) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, name text, tags jsonb, amount numeric(20,4))")
        conn.execute(f"INSERT INTO {table} SELECT g, 'row ' || g, jsonb_build_array(g, 'x' || g, g % 2 = 0), "
                     f"g * 1.0001 FROM generate_series(1, {ROWS}) g")
    ckpt = tmp_path / "ckpt"
    data = stack.config(tables=[{"name": table, "redis_key": f"{name}:{{id}}", "index": name}],
                        spark={"checkpoint_dir": str(ckpt), "master": "local[2]"}, metrics_port=0)
    path = write_config(tmp_path, data)
    log = tmp_path / "bootstrap.log"
    try:
        import redis

        cache = redis.Redis.from_url(stack.redis_url)
        first = _bootstrap(path, log)
        try:
            # The worst moment: the workers writing a round, before the bulk records how far it got.
            wait_for(lambda: first.poll() is not None or (cache.exists(f"{name}:1", f"{name}:2", f"{name}:3") > 0
                                                          and bool(_workers(first.pid))),
                     300, 0.02, "the workers writing")
            assert first.poll() is None, log.read_text()[-3000:]
            workers = _workers(first.pid)
            os.kill(first.pid, signal.SIGKILL)   # the command alone: its workers get no word of it
            first.wait(30)
            wait_for(lambda: not any(process_running(p) for p in workers), 30, 0.2,
                     "the killed command's workers gone")
        finally:
            if first.poll() is None:
                os.killpg(first.pid, signal.SIGKILL)
        part = read_bulk(ckpt)
        assert part is None or not part.done, part

        again = _bootstrap(path, log)
        seen: set[int] = set()   # its workers, sampled while it runs (once it exits they are init's children)
        deadline = time.monotonic() + 600
        while again.poll() is None and time.monotonic() < deadline:
            seen.update(_workers(again.pid))
            time.sleep(0.05)
        assert again.wait(600) == 0, log.read_text()[-3000:]
        text = log.read_text()
        assert "by the bulk apply" in text and "Spark session up" not in text, text[-3000:]
        wait_for(lambda: not any(process_running(p) for p in seen), 30, 0.2, f"its workers {sorted(seen)} gone")
        verified = cli("verify", "--json", "-c", str(path), "--timeout", "120", timeout=300)
        assert verified.returncode == 0, f"{verified.stdout[-4000:]}\n{verified.stderr[-2000:]}"
    finally:
        drop_pipeline(stack, data, table)
