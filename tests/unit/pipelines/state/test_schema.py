from connectors.table_shape import Column
from pipelines.state.schema import SchemaState


def test_first_sight_records_only_tables_not_seen_before(tmp_path):
    state = SchemaState(tmp_path)
    old = [Column(1, "id", "integer", False)]
    state.first_sight({"public.a": old, "public.gone": []})
    assert state.shapes() == {"public.a": old}
    # A later first sight (a rerun of bootstrap, a table added) keeps what was seen: a change made
    # since stays a change for the schema watch to act on.
    new = old + [Column(2, "extra", "text", True)]
    state.first_sight({"public.a": new, "public.b": new})
    assert state.shapes() == {"public.a": old, "public.b": new}


def test_a_resync_settling_its_work_waits_for_the_watch_editing_the_list(tmp_path):
    """The job's watch reads, acts and saves the pending work; `snapshot resync` removes its table's.
    Unlocked, the watch's save of the list it read before brought the settled work back."""
    import threading
    import time
    from types import SimpleNamespace

    from pipelines.ops.snapshot_add import _settle_schema_work
    from pipelines.state.schema import PendingWork

    state = SchemaState(tmp_path)
    state.save_pending([PendingWork("public.a", "public.a: column x dropped", stopped=True)])
    config = SimpleNamespace(spark=SimpleNamespace(checkpoint_dir=tmp_path))
    settled = threading.Event()
    with state.editing():   # the watch, mid-way through its read-modify-write
        read = state.pending()
        worker = threading.Thread(target=lambda: (_settle_schema_work(config, "public.a"), settled.set()))
        worker.start()
        time.sleep(0.3)
        assert not settled.is_set()   # waits for the watch's save
        state.save_pending(read)
    worker.join(10)
    assert settled.is_set() and state.pending() == []
