"""What a Python worker keeps across tasks is frozen out of the collector's sight (pyspark's
daemon runs a full gc.collect() after every task), and frozen again only when something new is kept."""
import gc

import pytest

from pipelines.spark import worker_context


@pytest.fixture
def fresh_worker():
    worker_context.forget()
    yield
    worker_context.forget()


def test_kept_objects_are_frozen_once_and_again_only_when_something_new_is_kept(fresh_worker, monkeypatch):
    collects = []
    real_collect = gc.collect
    monkeypatch.setattr(worker_context.gc, "collect", lambda *a: collects.append(1) or real_collect(*a))

    worker_context.settle()
    assert gc.get_freeze_count() > 0
    assert len(collects) == 1
    worker_context.settle()
    worker_context.settle()
    assert len(collects) == 1          # nothing new kept: no full collection per task

    worker_context._configs[b"{}"] = object()   # a config parsed: settled at the next task's start
    worker_context.settle()
    assert len(collects) == 2


def test_forget_lets_the_collector_see_everything_again(fresh_worker):
    before = gc.get_threshold()
    worker_context.settle()
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == worker_context.WORKER_GC_THRESHOLDS   # young collections far apart
    worker_context.forget()
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before


def test_the_collector_is_paused_while_a_task_builds_a_large_graph_and_restored_after():
    assert gc.isenabled()
    with worker_context.collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError):
        with worker_context.collector_paused():
            raise ValueError("a failing fold")
    assert gc.isenabled()               # restored on failure too
    gc.disable()
    try:
        with worker_context.collector_paused():
            pass
        assert not gc.isenabled()       # left off when it was off before
    finally:
        gc.enable()
