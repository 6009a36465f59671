"""High watermarks from a consumer that answers like librdkafka around a broker restart."""
import pytest
from confluent_kafka import KafkaError

from connectors.kafka import offsets
from connectors.kafka.broker_errors import NoFetchResponse


class _Eof:
    def __init__(self, tp):
        self.tp = tp

    def error(self):
        return KafkaError(KafkaError._PARTITION_EOF)

    def topic(self):
        return self.tp[0]

    def partition(self):
        return self.tp[1]


class _Consumer:
    """Partition EOF for every partition at once; the cached high watermark of `late` stays
    unknown (-1) for `unknown_polls` more polls, as it did after a broker restart."""

    def __init__(self, tps, late, unknown_polls):
        self.events = [_Eof(tp) for tp in tps]
        self.late, self.unknown_polls, self.polls = late, unknown_polls, 0

    def assign(self, _):
        pass

    def unassign(self):
        pass

    def poll(self, _timeout):
        self.polls += 1
        return self.events.pop(0) if self.events else None

    def get_watermark_offsets(self, tp, cached=False):
        if (tp.topic, tp.partition) == self.late and self.polls <= self.unknown_polls:
            return -1001, -1
        return 0, 10 + tp.partition


def _marks(consumer):
    marks = offsets.Watermarks({})
    marks._consumer = consumer
    return marks


def test_an_unknown_high_watermark_is_waited_for_not_read_as_a_log_at_minus_one():
    tps = [("t", 0), ("t", 1), ("t", 2)]
    assert _marks(_Consumer(tps, ("t", 1), unknown_polls=6)).high(tps) == {("t", 0): 10, ("t", 1): 11, ("t", 2): 12}


def test_a_high_watermark_never_known_is_no_fetch_response(monkeypatch):
    clock = iter(range(0, 1000, 5))
    monkeypatch.setattr(offsets.time, "monotonic", lambda: next(clock))
    tps = [("t", 0), ("t", 1)]
    with pytest.raises(NoFetchResponse) as err:
        _marks(_Consumer(tps, ("t", 1), unknown_polls=10**6)).high(tps)
    assert err.value.tps == [("t", 1)]
