"""kill -9 of the Spark driver in the middle of a batch; restarted on the same checkpoint, the
stores still end equal to Postgres. Also: SIGTERM stops the job cleanly, under load (batches spaced
by the cadence) and idle."""
import os
import random
import signal
import threading
import time
import uuid

import pytest

from tests.support.drills import converged, record
from tests.support.integration import (batches_committed, cli, diff_stores, drop_connector, kill_mid_batch, pg,
                                       start_job, wait_batches, wait_streaming, write_config)

pytestmark = [pytest.mark.integration, pytest.mark.drill]


@pytest.mark.parametrize("source", ["python", "jvm"])
def test_kill_driver_mid_batch_then_restart_is_exact(stack, tmp_path, source):
    name = f"crash_{uuid.uuid4().hex[:6]}"
    table = f"public.{name}"
    with pg(stack) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, name text, n int)")
        conn.execute(f"INSERT INTO {table} SELECT g, 'r' || g, 0 FROM generate_series(1, 5000) g")
    ckpt = tmp_path / "ckpt"
    data = stack.config(tables=[{"name": table, "redis_key": f"{name}:{{id}}", "index": name}],
                        # load_rate 1: every batch under load waits (pipelines/streaming/batch_cadence.py),
                        # so the SIGTERM below lands in or right after such a wait
                        spark={"checkpoint_dir": str(ckpt), "trigger": "500 ms", "max_offsets_per_trigger": 1500,
                               "kafka_source": source, "load_rate": 1})
    path = write_config(tmp_path, data)
    log = tmp_path / "job.log"
    stop = threading.Event()
    written = {"changes": 0}
    deleted: set[str] = set()

    def writer():
        rnd = random.Random(7)
        with pg(stack) as conn:
            next_id = 10_000
            while not stop.is_set():
                with conn.transaction():
                    for _ in range(20):
                        k = rnd.randint(1, 5000)
                        choice = rnd.random()
                        if choice < 0.6:
                            conn.execute(f"UPDATE {table} SET n = n + 1, name = 'u' || n WHERE id = %s", (k,))
                        elif choice < 0.8:
                            gone = conn.execute(f"DELETE FROM {table} WHERE id = %s RETURNING id", (k,)).fetchall()
                            deleted.update(str(r[0]) for r in gone)
                        else:
                            conn.execute(f"INSERT INTO {table} VALUES (%s, 'new', 0)", (next_id,))
                            next_id += 1
                        written["changes"] += 1
                # ~250 changes/s on two cores: a backlog at every restart, drained in seconds (at 0.02,
                # ~550/s, the drill spent a third of its time waiting for the job to catch up)
                time.sleep(0.04)

    proc = None
    try:
        assert cli("connector", "apply", "-c", str(path)).returncode == 0
        wait_streaming(stack, data)
        proc = start_job(path, log)
        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        kill_mid_batch(proc, ckpt / "query", log)  # returns once its JVM is gone too
        proc = start_job(path, log)
        # The restarted job carries live changes: two batches committed after the restart's first.
        restart_from = batches_committed(ckpt)
        wait_batches(ckpt, restart_from + 3, proc, log, 240, "batches committed after the restart")
        # SIGTERM under load: a clean stop (exit 0) even when Spark had begun the next batch
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()[-2000:]
        stop.set()
        thread.join()
        proc = start_job(path, log)
        assert written["changes"] > 500
        result = converged(stack, table, f"{name}:", name, deleted)
        record(f"kill -9 Spark driver mid-batch ({source} source)", written["changes"], result)
        assert not any(result.values()), result
        assert not any(diff_stores(stack, table, f"{name}:", name).values())

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()[-2000:]
        proc = None
    finally:
        stop.set()
        if proc is not None:
            os.killpg(proc.pid, signal.SIGKILL)
        drop_connector(stack, data)
