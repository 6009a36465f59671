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
