"""The long commands on a real terminal (tmux): Ctrl-C stops `bootstrap`, `run` and `rebuild` after
the current batch or task with one line and exit 0, a second Ctrl-C at once (130); the output is
cdckit's own lines, without Spark's noise; lost topics are one line naming the fix."""
import re
import shutil
import threading
import uuid

import pytest
import redis

from pipelines.state.query_offsets import batch_committed
from tests.support.integration import (assert_exact, cli, create_simple_table, drop_connector, fresh_redis_dbs, pg,
                                       wait_for, write_config)
from tests.support.terminal import Terminal

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (scripts/setup does)")]
LIVE_DB, SPARE_DB = 11, 12
BATCH_LINE = r"INFO job: batch (\d+): "
# What a person must not see: Spark's console progress and log lines, Python or Java traces, librdkafka.
NOISE = re.compile(r"\[Stage \d+|Traceback|Exception|^\s+at |WARN [A-Z]\w+:|NativeCodeLoader|incubator modules|"
                   r"log4j|%\d\|", re.M)


class Writes:
    """Updates of random rows in the background, so batches keep coming."""

    def __init__(self, stack, table: str, rows: int):
        self.stack, self.table, self.rows = stack, table, rows
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import random

        with pg(self.stack) as conn:
            i = 0
            while not self.stop.wait(0.005):
                conn.execute(f"UPDATE {self.table} SET n = n + 1, name = %s WHERE id = %s",
                             (f"w{i}", random.randint(1, self.rows)))
                i += 1

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def batches_seen(term: Terminal) -> int:
    return len(re.findall(BATCH_LINE, term.screen()))


def assert_quiet(screen: str) -> None:
    noise = NOISE.search(screen)
    assert noise is None, f"noise on the terminal: {noise.group(0)!r} in\n{screen[-4000:]}"


def test_ctrl_c_stops_bootstrap_and_run_after_the_batch_and_twice_at_once(stack, tmp_path):
    name = f"term_{uuid.uuid4().hex[:6]}"
    table = f"public.{name}"
    create_simple_table(stack, table, 3_000)
    ckpt = tmp_path / "ckpt"
    data = stack.config(tables=[{"name": table, "redis_key": f"{name}:{{id}}", "index": name}],
                        spark={"checkpoint_dir": str(ckpt)}, metrics_port=0)
    path = write_config(tmp_path, data)
    try:
        with Writes(stack, table, 3_000):
            # bootstrap: snapshot, then streaming; Ctrl-C in its streaming phase.
            with Terminal() as term:
                term.start("bootstrap", "-c", str(path))
                term.wait_for(r"INFO bootstrap: snapshot applied", 240)
                wait_for(lambda: batches_seen(term) >= 3, 120, 0.3, "batches after the snapshot")
                term.ctrl_c()
                assert term.exit_code(120) == 0, term.screen()[-4000:]
                screen = term.screen()
                assert "Ctrl-C (SIGINT): stopping after the current batch" in screen
                # The batch it names is the checkpoint's last (one applied but not yet recorded, on a
                # stalled machine, is said so and applied again by the next start).
                stopped = re.search(r"stopped after batch (\d+)[^\n]*; `cdckit run`", screen)
                assert stopped, screen[-3000:]
                assert batch_committed(ckpt, int(stopped.group(1))), "the batch it stopped after was not recorded"
                assert_quiet(screen)
            # run goes on after that batch (it is not applied twice); a second Ctrl-C does not wait.
            # (A single Ctrl-C stops `run` by the same code as `bootstrap`'s streaming phase above.)
            with Terminal() as term:
                term.start("run", "-c", str(path))
                wait_for(lambda: batches_seen(term) >= 1, 180, 0.3, "a batch")
                first = int(re.search(BATCH_LINE, term.screen()).group(1))
                # Spark goes on after the last recorded batch (a batch applied but not recorded runs again).
                assert first == int(stopped.group(1)) + 1, (first, stopped.group(0))
                term.ctrl_c()
                # The second once the first was seen: two signals before the handler ran are one.
                term.wait_for(r"Ctrl-C \(SIGINT\): stopping after the current batch", 30)
                term.ctrl_c()
                assert term.exit_code(60) == 130, term.screen()[-4000:]
                assert "again: stopping now" in term.screen()
        # Whatever the interrupted batch held is applied by the next run.
        with Terminal() as term:
            term.start("run", "-c", str(path))
            assert_exact(stack, table, f"{name}:", name, timeout_s=180)
            term.ctrl_c()
            assert term.exit_code(120) == 0
        # The broker loses the table's topic: one line that names the fix, and exit code 5.
        from confluent_kafka.admin import AdminClient

        topic = f"{data['topic_prefix']}.{table}"
        admin = AdminClient({"bootstrap.servers": stack.bootstrap_servers})  # held until its futures answer
        for done in admin.delete_topics([topic]).values():
            done.result()
        lost = cli("run", "-c", str(path), env={"SPARK_LOCAL_IP": "127.0.0.1"})
        assert lost.returncode == 5, (lost.stdout, lost.stderr)
        lines = [line for line in (lost.stdout + lost.stderr).splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: ") and "`cdckit bootstrap`" in lines[0], lines
    finally:
        drop_connector(stack, data)


def test_ctrl_c_stops_a_rebuild_which_then_resumes(stack, tmp_path):
    name = f"termrb_{uuid.uuid4().hex[:6]}"
    table = f"public.{name}"
    rows = 90_000
    create_simple_table(stack, table, rows)
    own = fresh_redis_dbs(stack, LIVE_DB, SPARE_DB)
    ckpt = tmp_path / "ckpt"
    data = own.config(tables=[{"name": table, "redis_key": f"{name}:{{id}}", "index": name}],
                      spark={"checkpoint_dir": str(ckpt)}, metrics_port=0,
                      redis={"url": own.redis_url, "rebuild_db": SPARE_DB})
    path = write_config(tmp_path, data)
    try:
        boot = cli("bootstrap", "--once", "-c", str(path), timeout=400)
        assert boot.returncode == 0, boot.stderr[-3000:]
        with Terminal() as term:
            term.start("rebuild", "cache", "-c", str(path))
            term.wait_for(r"bulk replay", 180)
            term.ctrl_c()
            assert term.exit_code(300) == 0, term.screen()[-4000:]
            screen = term.screen()
            assert "stopping after the running tasks" in screen
            # Tasks not begun when the stop came (two run at once with local[2]) skip their partition.
            assert re.search(r"stopped in the bulk replay with [123] partition\(s\) left", screen), screen[-3000:]
            assert re.search(r"rebuild \w+ stopped .*Resume with `cdckit rebuild cache", screen), screen[-3000:]
            assert_quiet(screen)
        # Readers kept the live database throughout; the same command finishes the job.
        assert redis.Redis.from_url(own.redis_url).exists(f"{name}:1")
        again = cli("rebuild", "cache", "-c", str(path), timeout=400)
        assert again.returncode == 0 and "resuming rebuild" in again.stdout and " done: " in again.stdout, \
            (again.stdout[-3000:], again.stderr[-3000:])
        assert_exact(own, table, f"{name}:", name, timeout_s=60)
    finally:
        drop_connector(stack, data)
