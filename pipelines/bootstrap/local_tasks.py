"""The snapshot bulk's tasks run by worker processes of this machine, when Spark's master is local.

A local master's executors are threads of the driver's JVM handing rows to Python workers on the
same cores; the bulk's tasks only read Kafka and write the stores, so Spark adds nothing there but
its cost: the session (a JVM start, ~8 s and most of a core beside Debezium's snapshot, for a
`bootstrap --once` that needs nothing else of Spark) and a job per round. Here the same tasks
(bootstrap_bulk.apply_group) run in as many spawned processes as the master has cores, started
once for the bulk and ended with it; a cluster's master keeps the Spark job.

Workers run in a process group of their own (Ctrl-C and a stop sent to the command's group reach
the command, which stops between rounds, as it does with Spark's tasks), end when the command is
gone (killed), and send their log records to the command, which writes them as its own (format,
masking, levels).
"""
from __future__ import annotations

import gc
import importlib
import logging
import logging.handlers
import multiprocessing
import os
import pickle
import re
import signal
import threading
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable

from pipelines.errors import CdckitError


def local_cores(master: str) -> int | None:
    """The cores of a local master (`local` 1, `local[4]` 4, `local[*]` this machine's, `local[2,3]`
    2: its task retries do not matter here); None for any other master."""
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?", master.strip())
    if m is None:
        return None
    n = m.group(1)
    return 1 if n is None else (os.cpu_count() or 1) if n == "*" else max(1, int(n))


class LocalTasks:
    """A pool of `processes` spawned workers (not forked: the command runs threads, a Kafka client
    and maybe a JVM) that run task groups as a Spark task does (`task`: bootstrap_bulk.run_group)."""

    def __init__(self, processes: int, task: Callable[[bytes, list[list], float], list[dict[str, Any]]]):
        # More workers than cores would only take turns (`local[16]` on two cores: 16 sets of clients).
        processes = max(1, min(processes, os.cpu_count() or 1))
        self._task = task   # a module-level function (bootstrap_bulk.run_group): the workers import its module
        ctx = multiprocessing.get_context("spawn")
        self._records = ctx.Queue()
        root = logging.getLogger()
        self._listener = logging.handlers.QueueListener(self._records, *root.handlers, respect_handler_level=True)
        self._listener.start()
        levels = {name: lg.level for name, lg in logging.root.manager.loggerDict.items()
                  if isinstance(lg, logging.Logger) and lg.level != logging.NOTSET}
        self._pool = ProcessPoolExecutor(processes, mp_context=ctx, initializer=_worker_start,
                                         initargs=(self._records, root.level, levels, os.getpid(),
                                                   task.__module__))
        self.processes = processes

    def warm(self) -> "LocalTasks":
        """Every worker started and its modules imported, in the background."""
        for _ in range(self.processes):
            self._pool.submit(importlib.import_module, self._task.__module__)
        return self

    def run(self, config_json: bytes, groups: list[list[list]], follow_s: float) -> list[dict[str, Any]]:
        """Every group's result rows (apply_group's), the groups run side by side. A task's error is
        raised here (as WorkerTaskError when it cannot cross from the worker as it is)."""
        try:
            futures = [self._pool.submit(_call, self._task, config_json, group, follow_s) for group in groups]
            return [row for f in futures for row in f.result()]
        except BrokenProcessPool as exc:
            raise WorkersLost("a worker process of the snapshot's bulk ended abruptly (killed, or out of "
                              "memory); run `cdckit bootstrap` again: it resumes from the last round") from exc

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        # The listener's stop puts a sentinel on the queue: a worker killed while it held the queue's
        # lock would make that wait forever. Its thread is a daemon: bounded here, gone at exit.
        stopping = threading.Thread(target=self._listener.stop, name="log-listener-stop", daemon=True)
        stopping.start()
        stopping.join(5.0)


class WorkersLost(CdckitError):
    """A worker process died (killed, out of memory): the round is lost; a rerun resumes the bulk."""


class WorkerTaskError(CdckitError):
    """A worker's task failed with an error that cannot be rebuilt here (a Kafka client's, or one
    whose constructor takes other arguments): its type, message, exit code and trace, as text."""

    def __init__(self, message: str, exit_code: int, trace: str):
        super().__init__(message)
        self.exit_code, self.trace = exit_code, trace

    def __reduce__(self):
        return WorkerTaskError, (str(self), self.exit_code, self.trace)


def _call(task, config_json: bytes, group: list[list], follow_s: float) -> list[dict[str, Any]]:
    """In the worker: the task, its error sent back as it is when it survives the trip."""
    try:
        return task(config_json, group, follow_s)
    except BaseException as exc:
        try:
            pickle.loads(pickle.dumps(exc))
        except Exception:  # noqa: BLE001 - any failure to cross: send it as text
            raise WorkerTaskError(f"{type(exc).__name__}: {exc}", getattr(exc, "exit_code", 1),
                                  traceback.format_exc()) from None
        raise


# A snapshot read leaves ~10 objects the cyclic collector tracks (the envelope's dicts, the row, its
# Change, position and version) and a chunk holds 20,000 rows: at the default thresholds (700, 10, 10)
# the collector ran every ~70 rows and walked the held chunk and the imported modules again and again.
# The modules are frozen out of its sight once imported, and it runs every 50,000 allocations: offline,
# 100,000 reads of benchmarks/bootstrap_1m.py's table through the read, fold, typing and bulk lines
# (the engine stubbed), 67 -> 51 us of CPU per row (best of four, interleaved). Nothing the bulk
# builds is cyclic, so this defers collections that would find nothing.
BULK_GC_THRESHOLDS = (50_000, 20, 20)


def _quiet_collector(module: str) -> None:
    """The task's module imported (a failure is left to the task to raise), then frozen, and the
    collector's thresholds raised for this worker (BULK_GC_THRESHOLDS)."""
    try:
        importlib.import_module(module)
    except Exception:  # noqa: BLE001 - the task imports it again and raises there, where it is reported
        pass
    gc.collect()
    gc.freeze()
    gc.set_threshold(*BULK_GC_THRESHOLDS)


def _worker_start(records, root_level: int, levels: dict[str, int], command: int, module: str) -> None:
    # Its own process group: Ctrl-C at the terminal and a stop sent to the command's group reach the
    # command alone, which stops between rounds (the workers end with the pool, or with the command).
    os.setpgrp()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_end_with_parent, args=(command,), name="parent-watch", daemon=True).start()
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.addHandler(logging.handlers.QueueHandler(records))
    root.setLevel(root_level)
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    _quiet_collector(module)


def _end_with_parent(parent: int) -> None:
    """A worker whose command was killed (-9: no shutdown reached it) waits for its next task
    forever otherwise, holding its memory and its stores' connections. What it was writing is
    written again by the rerun (versions make that harmless). `parent`: the command's pid, given
    from the command (a worker started after its command died has another parent already)."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)
