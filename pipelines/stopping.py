"""How a long command (`run`, `bootstrap`, `rebuild`) is asked to stop.

The first Ctrl-C (SIGINT, which a terminal sends to the whole foreground group) or SIGTERM asks it
to stop after the current batch or task: the command checks `requested` at its safe points, says
so in one line and exits 0. A second one stops the process at once (exit 130); whatever was under
way is re-run from the checkpoint next time, which versioned writes make harmless. The Spark JVM
never sees the terminal's signal (pipelines/spark/session.py), so the first stop is always clean.
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading

log = logging.getLogger("cdckit.stop")
SIGNAL_NAMES = {signal.SIGINT: "Ctrl-C (SIGINT)", signal.SIGTERM: "SIGTERM"}


class StopRequest:
    def __init__(self, what: str = "after the current batch") -> None:
        self.requested = threading.Event()
        self.what = what

    def install(self) -> "StopRequest":
        """Only the main thread may set handlers; elsewhere (tests, embedding) the caller stops us."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, self._on_signal)
            signal.signal(signal.SIGTERM, self._on_signal)
        return self

    def _on_signal(self, signum: int, _frame) -> None:
        name = SIGNAL_NAMES.get(signum, f"signal {signum}")
        if self.requested.is_set():
            log.warning("%s again: stopping now", name)
            sys.stderr.flush()
            os._exit(130)
        log.warning("%s: stopping %s (again to stop at once)", name, self.what)
        self.requested.set()

    def is_set(self) -> bool:
        return self.requested.is_set()

    def wait(self, seconds: float) -> bool:
        return self.requested.wait(seconds)

    def set(self) -> None:
        self.requested.set()


class Interrupted(Exception):
    """A stop request honoured at a safe point of long work that a rerun resumes (a rebuild)."""

    def __init__(self, where: str):
        self.where = where   # e.g. "before the catch-up"
        super().__init__(f"stopped {where}")
