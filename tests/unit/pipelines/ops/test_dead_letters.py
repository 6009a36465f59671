from connectors.kafka.dead_letter_topic import Letter
from pipelines.ops.dead_letters import newest_records


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
    from pipelines.ops.dead_letters import replayable

    later = {("t", 0): [_rec(b"a", 5, b"old"), _rec(b"a", 7, b"new")]}
    letters = [_letter(b"a", 5, None), _letter(None, 3, None), _letter(b"k", 4, None, partition=1)]
    rows = newest_records(letters, later)
    assert [(r["key"], r["offset"], r["value"]) for r in rows] == [(b"a", 7, b"new")]
    assert [replayable(x, later) for x in letters] == [True, False, False]
