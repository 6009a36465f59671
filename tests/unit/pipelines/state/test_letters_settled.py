"""The mark `cdckit dlq replay` leaves: letters below it are settled."""
from pipelines.state import letters_settled as settled
from pipelines.state.bootstrap_state import BootstrapState, SnapshotBulk, read_bulk, read_state, write_bulk, write_state


def test_no_mark_settles_nothing_and_a_mark_round_trips(tmp_path):
    assert settled.settled_offset(tmp_path) == 0
    settled.record_settled(tmp_path, 42)
    assert settled.settled_offset(tmp_path) == 42


def test_a_mark_past_the_topics_end_belongs_to_a_recreated_topic():
    assert settled.pending_from(42, 100) == 42 and settled.pending_from(42, 42) == 42
    assert settled.pending_from(42, 5) == 0


def test_the_snapshots_dead_letters_are_kept_with_its_watermark(tmp_path):
    state = BootstrapState(1.0, 2.0, 100, {}, "bulk apply (3 rounds)", {"public.a": 10}, {"public.a": 10},
                           dead_letters={"public.a": 4}, dead_letters_end=9)
    write_state(tmp_path, state)
    assert read_state(tmp_path) == state
    clean = BootstrapState(1.0, 2.0, 100, {}, "x", {}, {})
    write_state(tmp_path, clean)
    assert "dead_letters" not in (tmp_path / "cdckit-bootstrap.json").read_text() and read_state(tmp_path) == clean
    bulk = SnapshotBulk({"t": {"0": 5}}, [], {}, {"public.a": 5}, dead_letters={"public.a": 2})
    write_bulk(tmp_path, bulk)
    assert read_bulk(tmp_path) == bulk
