"""The first dead letter of each kind reaches the driver as a sample and is logged once per process;
letters of one cause that differ only in the record they name are one kind."""
from derived.change import DeadLetter, Position
from pipelines.apply import letter_kinds as lk
from pipelines.apply.batch import apply_records
from pipelines.apply.stats import BatchStats, add_stats
from pipelines.spark.partition_apply import apply_rows, stats_of
from tests.support.records import key, rec, value
from tests.unit.pipelines.apply.test_batch import Letters, RefusingStore, stores

REFUSED = ("search rejected document '{id}': mapper_parsing_exception: failed to parse field [n] of type [integer] "
           "in document with id '{id}'. Preview of field's value: 'x{id}'")


def letter(offset, reason, topic="cdc.public.items", stage="apply"):
    return DeadLetter(Position(topic, 0, offset), None, None, stage, reason)


def test_a_kind_blanks_what_names_one_record():
    assert lk.kind_reason(REFUSED.format(id=3)) == lk.kind_reason(REFUSED.format(id=41))
    assert "field [n] of type [integer]" in lk.kind_reason(REFUSED.format(id=3))
    assert lk.kind_reason("value is not valid JSON: line 1 column 2 (char 1)") == \
        "value is not valid JSON: line N column N (char N)"


def test_a_sample_keeps_the_first_letter_of_each_kind():
    letters = [letter(i, REFUSED.format(id=i)) for i in range(5)] + [letter(9, "unknown op 'x'", stage="decode"),
                                                                     letter(10, REFUSED.format(id=1), "cdc.public.other")]
    sampled = lk.sample(letters)
    assert [(s["topic"], s["offset"], s["stage"]) for s in sampled] == [
        ("cdc.public.items", 0, "apply"), ("cdc.public.items", 9, "decode"), ("cdc.public.other", 10, "apply")]
    assert lk.merge(sampled, lk.sample([letter(20, REFUSED.format(id=20))])) == sampled
    assert len(lk.sample([letter(i, f"reason {'x' * i}") for i in range(50)])) == lk.PER_TASK


def test_the_driver_logs_each_kind_once_naming_the_table_and_the_record():
    first = lk.FirstLetters()
    samples = lk.sample([letter(7, REFUSED.format(id=7))])
    [line] = first.lines(samples, lambda topic: "public.items")
    assert line.startswith("dead letter: public.items (apply): search rejected document '7'")
    assert "cdc.public.items[0]@7" in line and "`cdckit dlq list`" in line
    assert first.lines(lk.sample([letter(8, REFUSED.format(id=8))]), lambda topic: "public.items") == []
    assert len(first.lines(lk.sample([letter(9, "redis: WRONGTYPE")]), lambda topic: None)) == 1


def test_batch_stats_carry_the_samples_and_the_fresh_generations_letters():
    live, _ = stores()
    fresh, _ = stores()
    fresh.search = RefusingStore()
    stats = apply_records([rec(0, key(1), value("c", 1, 100, "one", 90))], live, {}, Letters(), rebuild=fresh)
    assert stats.dead_letters == 1 and stats.fresh_dead_letters == 1
    assert [s["reason"] for s in stats.letter_kinds] == ["mapper_parsing_exception"]
    total = BatchStats()
    add_stats(total, stats)
    add_stats(total, stats)
    assert total.fresh_dead_letters == 2 and len(total.letter_kinds) == 1


def test_the_samples_survive_the_trip_through_a_stats_row():
    live, _ = stores()
    live.search = RefusingStore()
    [row] = apply_rows([[rec(0, key(1), value("c", 1, 100, "one", 90))]], live, Letters(), {})
    back = stats_of(row)
    assert back.dead_letters == 1 and back.letter_kinds[0]["offset"] == 0 and back.fresh_dead_letters == 0
