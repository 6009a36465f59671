from connectors.kafka.dead_letter_topic import Letter
from pipelines.ops.dead_letter_replay import newest_records


def _letter(key, offset, value=b"v", topic="t", partition=0):
    return Letter(0, topic, partition, offset, "apply", "r", key, value)


def _rec(key, offset, value=b"v", topic="t", partition=0):
    return {"key": key, "value": value, "topic": topic, "partition": partition, "offset": offset}


def test_a_letter_is_replaced_by_its_keys_newest_record():
    later = {("t", 0): [_rec(b"a", 5, b"old"), _rec(b"b", 6), _rec(b"a", 7, b"new")]}
    rows = newest_records([_letter(b"a", 5, b"old")], later)
    assert [(r["key"], r["offset"], r["value"]) for r in rows] == [(b"a", 7, b"new")]


def test_a_later_delete_keeps_its_record_before_the_tombstone():
    later = {("t", 0): [_rec(b"a", 5), _rec(b"a", 8, b"delete"), _rec(b"a", 9, None)]}
    rows = newest_records([_letter(b"a", 5)], later)
    assert [(r["offset"], r["value"]) for r in rows] == [(8, b"delete"), (9, None)]


def test_a_tombstone_alone_after_compaction_is_replayed_alone():
    later = {("t", 0): [_rec(b"a", 5), _rec(b"a", 9, None)]}
    rows = newest_records([_letter(b"a", 5)], later)
    assert [(r["offset"], r["value"]) for r in rows] == [(5, b"v"), (9, None)]


def test_letters_without_key_or_readable_partition_are_replayed_as_they_are():
    letters = [_letter(None, 3), _letter(b"k", 4, partition=1), _letter(b"a", 5)]
    rows = newest_records(letters, {("t", 0): [_rec(b"a", 5)]})
    assert [(r["partition"], r["offset"]) for r in rows] == [(0, 3), (0, 5), (1, 4)]


def test_two_letters_of_one_key_give_one_record():
    later = {("t", 0): [_rec(b"a", 5), _rec(b"a", 6), _rec(b"a", 7, b"last")]}
    rows = newest_records([_letter(b"a", 5), _letter(b"a", 6)], later)
    assert [r["offset"] for r in rows] == [7]


def test_letters_without_values_replay_their_keys_newest_record():
    from pipelines.ops.dead_letter_replay import replayable

    later = {("t", 0): [_rec(b"a", 5, b"old"), _rec(b"a", 7, b"new")]}
    letters = [_letter(b"a", 5, None), _letter(None, 3, None), _letter(b"k", 4, None, partition=1)]
    rows = newest_records(letters, later)
    assert [(r["key"], r["offset"], r["value"]) for r in rows] == [(b"a", 7, b"new")]
    assert [replayable(x, later) for x in letters] == [True, False, False]


def _at(offset, key, source_offset, topic="t"):
    return Letter(offset, topic, 0, source_offset, "apply", "r", key, b"v")


def test_a_letter_still_fails_when_its_keys_replayed_record_is_refused_again():
    from derived.change import DeadLetter, Position
    from pipelines.ops.dead_letter_replay import still_failing

    letters = [_at(0, b"a", 5), _at(1, b"b", 6), _at(2, None, 7)]
    failed = [DeadLetter(Position("t", 0, 9), b"a", b"v", "apply", "mapper"),      # a's newest record
              DeadLetter(Position("t", 0, 7), None, b"v", "decode", "not JSON")]   # replayed as it is
    assert [x.offset for x in still_failing(letters, failed)] == [0, 2]


def test_a_replay_settles_up_to_its_first_letter_that_still_fails():
    from pipelines.ops.dead_letter_replay import settled_mark

    letters = [_at(4, b"a", 5), _at(5, b"b", 6), _at(6, b"c", 7)]
    assert settled_mark(letters, None, previous=4, from_offset=0) == 7
    assert settled_mark(letters, 5, previous=4, from_offset=0) == 5
    assert settled_mark(letters, 5, previous=6, from_offset=0) == 6       # never backwards
    assert settled_mark(letters, None, previous=2, from_offset=4) == 2    # letters 2..3 were not replayed
    assert settled_mark([], None, previous=3, from_offset=0) == 3


def test_record_replay_moves_the_mark_beside_the_checkpoint(monkeypatch, tmp_path):
    from pipelines.config import parse_config
    from pipelines.ops.dead_letter_replay import record_replay
    from pipelines.state import letters_settled as settled
    from tests.support.configs import BASE

    cfg = parse_config({**BASE, "spark": {"checkpoint_dir": str(tmp_path)}})
    monkeypatch.setattr("connectors.kafka.dead_letter_topic.topic_end", lambda conf, topic: 3)
    assert settled.settled_offset(tmp_path) == 0
    letters = [_at(0, b"a", 5), _at(1, b"b", 6), _at(2, b"c", 7)]
    assert record_replay(cfg, letters, {"first_failing_offset": 1}, 0) == 1
    assert record_replay(cfg, letters, {"first_failing_offset": None}, 0) == 3
    assert settled.settled_offset(tmp_path) == 3
    # The topic recreated (its end below the mark): the old mark means nothing for its letters.
    settled.record_settled(tmp_path, 50)
    assert record_replay(cfg, letters, {"first_failing_offset": 2}, 0) == 2
