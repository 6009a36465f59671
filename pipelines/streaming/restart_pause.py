"""The pause before the job restarts its queries after a restartable failure.

The pause doubles after each failure (up to a minute) so a store or broker that stays away is not
hammered. Waiting it out whole after the cause is gone cost up to a minute of lag each time: a
store rebuilt after it lost its data, or a broker back after a restart, sat idle while the job
slept. So, past a minimum, the pause also ends once a probe of what failed answers, having failed
first in this pause (the first two pauses need no failure first: the cause is often gone before
they begin): the stores answer and hold their markers (StoreUnavailable), the broker
answers (Kafka failures). A probe that passes from the start says nothing about the cause (a 429,
a catalog read, partitions without a leader): then the pause is waited out, doubling as before.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from pipelines.config import Config

log = logging.getLogger("cdckit.job")

MINIMUM_S = 5.0
PROBE_EVERY_S = 1.0


def pause(stop, seconds: float, ready: Callable[[], bool] | None, minimum_s: float = MINIMUM_S,
          clock: Callable[[], float] = time.monotonic) -> bool:
    """Sleep `seconds`, or from `minimum_s` on until `ready()`; True when a stop was asked."""
    start = clock()
    # The first two pauses (5 and 10 s) believe a probe that never failed: what failed is often back
    # before the pause begins (a rebuilt store, a thawed server). Later ones need it to fail first.
    probe = _Probe(ready, believed=seconds <= 2 * minimum_s) if ready is not None else None
    while True:
        elapsed = clock() - start
        if elapsed >= seconds:
            return False
        if stop.wait(min(PROBE_EVERY_S, seconds - elapsed)):
            return True
        # Probed from the start (a failure seen counts), ended no sooner than the minimum.
        if probe is not None and probe.answered() and clock() - start >= minimum_s:
            log.info("what failed answers again after %.0f s; restarting now", clock() - start)
            return False


class _Probe:
    """`ready()` in a thread of its own, one at a time: a frozen server holds a probe for its
    client's whole timeout, and the pause (and a stop request) must not wait for it. It answers
    once `ready()` passed, and, unless `believed`, had failed (or hung) before in this pause."""

    def __init__(self, ready: Callable[[], bool], believed: bool = False):
        self.ready = ready
        self.passed = False
        self.failed_once = believed   # the cause seen by the probe: its passing later means it is gone
        self.thread: threading.Thread | None = None

    def answered(self) -> bool:
        if self.passed and self.failed_once:
            return True
        if self.thread is None or not self.thread.is_alive():
            self.thread = threading.Thread(target=self._run, name="cdckit-restart-probe", daemon=True)
            self.thread.start()
            self.thread.join(0.5)   # a server that answers does so at once
        if self.thread.is_alive():  # held: a frozen server is a failure too
            self.failed_once = True
        return self.passed and self.failed_once

    def _run(self) -> None:
        try:
            self.passed = bool(self.ready())
        except Exception:  # noqa: BLE001 - the probe failing is the cause still being there
            self.passed = False
        if not self.passed:
            self.failed_once = True


def readiness(config: Config, failure: str) -> Callable[[], bool] | None:
    """The probe of what a failure's text names, or None (the pause is waited out)."""
    if "StoreUnavailable" in failure:
        return lambda: stores_ready(config)
    if "KafkaUnavailable" in failure or "NoFetchResponse" in failure:
        return lambda: kafka_ready(config)
    return None


def stores_ready(config: Config) -> bool:
    """Both stores answer and hold the pipeline's markers (a store that lost its data answers
    without them until a rebuild marks it again)."""
    from pipelines.apply.stores import stores_from_config

    sinks = stores_from_config(config).by_name(config.sinks)
    return all(sink.marked(config.topic_prefix) for sink in sinks.values())


def kafka_ready(config: Config) -> bool:
    from connectors.kafka.clients import topic_names

    return bool(topic_names(config.kafka.client_config()))
