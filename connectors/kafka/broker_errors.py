"""What can go wrong with the broker, by what the pipeline does about it."""
from __future__ import annotations


class KafkaUnavailable(RuntimeError):
    """The broker does not answer (restarting, unreachable): `cdckit run` retries after a pause."""


class NoFetchResponse(KafkaUnavailable):
    def __init__(self, tps: list[tuple[str, int]]):
        self.tps = tps
        super().__init__(f"no fetch response for {tps} within 30 s: the broker is unreachable, or it lost these "
                         "partitions (after a broker restart that lost its data, recover with `cdckit bootstrap`)")


class TopicLost(RuntimeError):
    """The log is behind the position already read: the topic was recreated or the broker lost it."""
