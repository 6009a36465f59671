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


class FakeMessage:
    def __init__(self, offset, source):
        self._offset, self._source = offset, source

    def error(self):
        return None

    def offset(self):
        return self._offset

    def headers(self):
        return [("cdckit.source.topic", self._source.encode()), ("cdckit.reason", f"reason {self._offset}".encode()),
                ("cdckit.stage", b"apply")]


class FakeConsumer:
    """A dead-letter topic of letters from two source topics, read from the assigned offset."""

    letters = ["cdc.public.a", "cdc.public.a", "cdc.public.b", "cdc.public.a"]

    def __init__(self, conf):
        self.at = 0

    def assign(self, partitions):
        self.at = partitions[0].offset

    def consume(self, n, timeout):
        batch = [FakeMessage(o, self.letters[o]) for o in range(self.at, min(len(self.letters), self.at + 2))]
        self.at += len(batch)
        return batch

    def close(self):
        pass


def test_letters_are_tallied_by_source_topic_and_read_on_from_where_they_stopped(monkeypatch):
    import confluent_kafka

    monkeypatch.setattr(confluent_kafka, "Consumer", FakeConsumer)
    tally = dead_letter_topic.tally_letters({}, "cdc.dlq", 1, 3)
    assert tally.per_topic == {"cdc.public.a": 1, "cdc.public.b": 1} and tally.position == 3
    assert tally.first_reason == {"cdc.public.a": "reason 1", "cdc.public.b": "reason 2"}
    tally = dead_letter_topic.tally_letters({}, "cdc.dlq", 1, 4, tally=tally)
    assert tally.per_topic == {"cdc.public.a": 2, "cdc.public.b": 1} and tally.total == 3 == tally.read
    limited = dead_letter_topic.tally_letters({}, "cdc.dlq", 0, 4, limit=2)
    assert limited.read == 2 and limited.total == 4
