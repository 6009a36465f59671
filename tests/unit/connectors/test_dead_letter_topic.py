from connectors.kafka import dead_letter_topic
from connectors.kafka.dead_letter_topic import DROPPED, DeadLetterWriter
from derived.change import DeadLetter, Position


class FakeProducer:
    def __init__(self, conf):
        self.sent = []

    def produce(self, topic, key, value, headers, on_delivery):
        self.sent.append((key, value, dict(headers)))

    def flush(self, timeout):
        return 0


def writer(monkeypatch, include_values):
    import confluent_kafka

    monkeypatch.setattr(dead_letter_topic, "ensure_topic", lambda conf, topic: None)
    monkeypatch.setattr(confluent_kafka, "Producer", FakeProducer)
    return DeadLetterWriter({}, "cdc.dlq", include_values)


LETTER = DeadLetter(Position("cdc.public.t", 2, 41), b'{"id":1}', b'{"after":{"ssn":"secret"}}', "apply", "too big")


def test_without_values_a_letter_keeps_key_position_and_reason(monkeypatch):
    w = writer(monkeypatch, include_values=False)
    assert w.write([LETTER]) == 1
    key, value, headers = w._producer.sent[0]
    assert key == b'{"id":1}' and value is None
    assert headers["cdckit.reason"] == b"too big" and headers["cdckit.source.offset"] == b"41"
    assert headers["cdckit.source.topic"] == b"cdc.public.t" and headers[DROPPED] == b"true"


def test_by_default_the_value_is_kept(monkeypatch):
    w = writer(monkeypatch, include_values=True)
    w.write([LETTER])
    _, value, headers = w._producer.sent[0]
    assert value == LETTER.value and DROPPED not in headers


def test_a_tombstone_letter_is_not_marked_dropped(monkeypatch):
    w = writer(monkeypatch, include_values=False)
    w.write([DeadLetter(Position("t", 0, 1), b"k", None, "decode", "r")])
    assert DROPPED not in w._producer.sent[0][2]
