"""What a running rebuild asks of the live pipeline (LiveDuty): one writer of the fresh generation."""
import multiprocessing
import time

from pipelines.state import rebuild_state as rs
TARGETS = rs.Targets((("public.items", "items_v2"),), 10)


def _save(tmp_path, **fields):
    state = rs.RebuildState({"rebuild_id": "r1", "end": {"t": {"0": 5}}}, TARGETS, **fields)
    rs.save(tmp_path, state)
    return state


def test_no_rebuild_or_no_dual_write_asks_nothing(tmp_path):
    assert rs.live_duty(tmp_path) is None
    _save(tmp_path, phase="bulk")
    assert rs.live_duty(tmp_path) is None


def test_the_live_pipeline_catches_up_once_per_hand_over_then_writes_both(tmp_path):
    _save(tmp_path, phase="catchup", dual_write=True, catchup_by=rs.CATCHUP_BY_LIVE, catchup_epoch="e1")
    duty = rs.live_duty(tmp_path)
    assert duty.catch_up and duty.targets == TARGETS and duty.rebuild_id == "r1"
    rs.mark_live_caught_up(tmp_path, "e1", 12, {"records": 3})
    duty = rs.live_duty(tmp_path)
    assert not duty.catch_up and duty.targets == TARGETS
    assert rs.live_caught_up(tmp_path, "e1") == {"epoch": "e1", "batch_id": 12, "records": 3}
    # A rerun hands over again: the earlier replay may have been followed by other writers.
    _save(tmp_path, phase="catchup", dual_write=True, catchup_by=rs.CATCHUP_BY_LIVE, catchup_epoch="e2")
    assert rs.live_duty(tmp_path).catch_up and rs.live_caught_up(tmp_path, "e2") is None


def test_while_the_rebuild_replays_itself_the_live_pipeline_writes_no_fresh_generation(tmp_path):
    _save(tmp_path, phase="catchup", dual_write=True, catchup_by=rs.CATCHUP_BY_REBUILD, catchup_epoch="e1")
    duty = rs.live_duty(tmp_path)
    assert duty.targets is None and not duty.catch_up


def _hold(path, seconds, ready):
    with rs.writer_lock(path):
        ready.set()
        time.sleep(seconds)


def test_the_writer_lock_waits_for_its_holder_and_is_freed_by_its_death(tmp_path):
    ready = multiprocessing.Event()
    holder = multiprocessing.Process(target=_hold, args=(tmp_path, 1.0, ready))
    holder.start()
    assert ready.wait(10)
    started = time.monotonic()
    with rs.writer_lock(tmp_path):
        assert time.monotonic() - started > 0.5      # it waited for the holder
    holder.join()
    ready = multiprocessing.Event()
    holder = multiprocessing.Process(target=_hold, args=(tmp_path, 60.0, ready))
    holder.start()
    assert ready.wait(10)
    holder.kill()                                     # a rebuild killed mid-replay
    started = time.monotonic()
    with rs.writer_lock(tmp_path):
        assert time.monotonic() - started < 10
    holder.join()


def test_writers_done_once_the_live_batch_holding_the_lock_ends(tmp_path):
    assert rs.writers_done(tmp_path, 0.1)                 # no live batch with a duty: at once
    ready = multiprocessing.Event()
    holder = multiprocessing.Process(target=_hold, args=(tmp_path, 1.0, ready))   # a batch with a duty
    holder.start()
    assert ready.wait(10)
    started = time.monotonic()
    assert rs.writers_done(tmp_path, 30)
    assert time.monotonic() - started > 0.5               # it waited for the batch's end
    holder.join()
    ready = multiprocessing.Event()
    holder = multiprocessing.Process(target=_hold, args=(tmp_path, 60.0, ready))  # a batch stuck on a store
    holder.start()
    assert ready.wait(10)
    assert not rs.writers_done(tmp_path, 0.5)              # given up, not waited for forever
    holder.kill()
    holder.join()


def test_state_round_trips_through_its_file(tmp_path):
    state = _save(tmp_path, phase="catchup", dual_write=True, catchup_by=rs.CATCHUP_BY_LIVE, catchup_epoch="e1")
    assert rs.load(tmp_path) == state
    plain = _save(tmp_path, phase="catchup", dual_write=True)   # written before catchup_by existed
    assert rs.load(tmp_path) == plain and rs.live_duty(tmp_path).targets == TARGETS


def test_a_refused_rebuilds_verdict_and_awaited_batch_round_trip(tmp_path):
    verdict = {"count": 4, "by": {"bulk": 4}, "accepted": 0, "switch": False}
    state = _save(tmp_path, phase="refused", dead_letters=verdict, live_batch_at_switch=17)
    assert rs.load(tmp_path) == state
    assert rs.progress_totals(tmp_path, lambda *a: {}) == (True, 0, 0)   # unfinished, past the bulk


def test_the_live_pipelines_dual_write_letters_add_up_in_its_report_of_the_hand_over(tmp_path):
    rs.add_live_letters(tmp_path, "e1", 2)                 # no report yet: nothing to add to
    assert rs.live_caught_up(tmp_path, "e1") is None
    rs.mark_live_caught_up(tmp_path, "e1", 12, {"records": 3, "dead_letters": 1})
    rs.add_live_letters(tmp_path, "e1", 2)
    rs.add_live_letters(tmp_path, "e1", 3)
    rs.add_live_letters(tmp_path, "e0", 9)                 # an earlier hand-over's
    assert rs.live_caught_up(tmp_path, "e1")["dual_write_dead_letters"] == 5
