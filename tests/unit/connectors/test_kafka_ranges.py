"""Offset ranges without a broker: admission control and packing ranges into tasks."""
from connectors.kafka.offsets import admit
from connectors.kafka.ranges import KafkaRange, pack_ranges


def test_admission_is_proportional():
    begin = {("t", 0): 0, ("t", 1): 0}
    end = {("t", 0): 100, ("t", 1): 300}
    assert admit(begin, end, 40) == {("t", 0): 10, ("t", 1): 30}
    assert admit(begin, end, 1000) == end


def test_small_ranges_ride_along_with_large_ones():
    data = [KafkaRange("db.orders", 0, 0, 900), KafkaRange("db.orders", 1, 0, 1100)]
    support = [KafkaRange("db.heartbeat", 0, 7, 8), KafkaRange("db.signal", 0, 0, 2)]
    sets = pack_ranges(support + data, tasks=2)
    assert len(sets) == 2
    loads = sorted(sum(r.end - r.start for r in s) for s in sets)
    assert loads == [903, 1100]  # both small ranges beside the lighter partition, no third task
    assert sorted((r.topic, r.partition) for s in sets for r in s) == sorted(
        (r.topic, r.partition) for r in support + data)
    assert len(pack_ranges(data[:1], tasks=2)) == 1


def test_range_records_reads_each_range_as_row_dicts_a_fetch_at_a_time(monkeypatch):
    import connectors.kafka.ranges as ranges

    from tests.support.records import KafkaMessage

    def M(offset, value, ts):
        return KafkaMessage(offset, value, ts, key=b"k")

    log = {("a", 0): [M(3, b"x", 1_700_000_000_000), M(4, None, 0)], ("b", 1): [M(7, b"BEGIN", 5), M(8, b"y", -1)]}
    asked = []

    def read_messages(conf, r):
        asked.append((r.topic, r.partition, r.start, r.end))
        for m in log[(r.topic, r.partition)]:
            yield [m]   # one fetch per record

    monkeypatch.setattr(ranges, "read_messages", read_messages)
    plain = list(ranges.range_records({}, [("a", 0, 3, 5), ("b", "1", "7", "9")]))
    assert asked == [("a", 0, 3, 5), ("b", 1, 7, 9)]
    assert [len(f) for f in plain] == [1, 1, 1, 1]
    assert plain[0] == [{"key": b"k", "value": b"x", "topic": "a", "partition": 0, "offset": 3}]
    timed = [r for f in ranges.range_records({}, [("a", 0, 3, 5), ("b", 1, 7, 9)], timestamps=True,
                                             skip=lambda topic, value: topic == "b" and value == b"BEGIN") for r in f]
    assert [(r["topic"], r["offset"], r["timestamp"]) for r in timed] == [
        ("a", 3, 1_700_000_000_000), ("a", 4, None), ("b", 8, None)]
