"""What a Python worker (a Spark executor's, or the driver's own process) builds once per config
and reuses across tasks: the parsed config, the Kafka client settings (secrets resolved), the stores
and the dead-letter writer. Every executor-side function takes the config as JSON bytes (what Spark
ships with a task) and asks here, so the config is parsed once per worker, not per task or per
call site.
"""
from __future__ import annotations

import gc
import sys
from contextlib import contextmanager
from typing import Any

import orjson

from pipelines.state.rebuild_state import Targets

_configs: dict[bytes, Any] = {}
_resources: dict[tuple[bytes, Targets | None], Any] = {}
_settled: tuple[int, int, int] | None = None
# A worker's tasks build many short-lived containers (a record's envelope, row, change): at
# Python's default (a young collection every 700 allocations, an older one every 10 of those) the
# collector walked the chunk of rows a task holds again and again, over a third of the bootstrap
# bulk's CPU per row (benchmarks/README.md, "garbage collector"). Refcounting frees nearly all of
# it; the collector is for cycles, which these rarely make.
WORKER_GC_THRESHOLDS = (50_000, 20, 100)
_PROCESS_GC_THRESHOLDS = gc.get_threshold()


def settle() -> None:
    """Move what this worker keeps for good (modules, the parsed config, the stores and their
    clients) out of the garbage collector's sight. pyspark's daemon runs a full gc.collect() after
    every task of a reused worker: over ~130k live objects that took 30-150 ms per task, two
    thirds of the workers' CPU on a quiet stream (benchmarks/cpu_per_change.py). Done again only
    when something new was kept (a module imported, a config or stores built), so the one-off
    objects a task holds at that moment are frozen a bounded number of times."""
    global _settled
    mark = (len(sys.modules), len(_configs), len(_resources))
    if mark != _settled:
        gc.set_threshold(*WORKER_GC_THRESHOLDS)
        gc.collect()
        gc.freeze()
        _settled = mark


@contextmanager
def collector_paused():
    """The cyclic garbage collector off while a task builds a large object graph (the documents'
    state unpickled and folded: ~100k containers): every collection the allocations trigger would
    walk the graph again, ~4x the unpickling itself (benchmarks/nested_documents.py). What the task
    leaves behind is collected after it (pyspark's daemon collects after every task)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def worker_config(config_json: bytes):
    """The config shipped as JSON, parsed once per worker (secret refs resolve where it runs)."""
    settle()   # at a task's start: the previous task's garbage is collected by then
    config = _configs.get(config_json)
    if config is None:
        from pipelines.config import parse_config

        config = _configs[config_json] = parse_config(orjson.loads(config_json))
    return config


def kafka_settings(config_json: bytes) -> dict[str, Any]:
    """The Kafka client settings of the config (a copy: librdkafka callers may add to it)."""
    return dict(worker_config(config_json).kafka.client_config())


def worker_resources(config_json: bytes, targets: Targets | None = None):
    """Stores and the dead-letter writer, built once per Python worker and config (given
    `targets`: a rebuild's fresh generations alone, without a writer)."""
    settle()
    key = (config_json, targets)
    if key not in _resources:
        from connectors.kafka.dead_letter_topic import DeadLetterWriter
        from pipelines.apply.stores import stores_from_config

        config = worker_config(config_json)
        if targets is None:
            _resources[key] = (stores_from_config(config),
                               DeadLetterWriter(config.kafka.client_config(), config.dead_letter_topic,
                                                config.dlq.include_values))
        else:
            _resources[key] = stores_from_config(config, targets)
    return _resources[key]


def forget() -> None:
    """Drop what this process holds (its Kafka producers close when collected)."""
    global _settled
    _resources.clear()
    _configs.clear()
    gc.unfreeze()
    gc.set_threshold(*_PROCESS_GC_THRESHOLDS)
    _settled = None
