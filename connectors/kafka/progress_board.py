"""Progress of a distributed job's tasks, kept where every host reaches it: the broker's consumer
group offsets. Each task commits, for its own topic partition, the position it has read to, and a
small JSON in the commit's metadata (records read, written, done); the driver reads the group's
commits to draw progress bars (which partitions are finished it keeps itself). A second group
(`<group>-stop`) carries the driver's stop request to tasks not yet begun.

Nothing joins these groups (no rebalance, no member): commits from a consumer outside a generation
are accepted for a group without members. A failed progress commit never fails a task (progress
is advisory; a partition whose `done` is lost is done again, idempotently)."""
from __future__ import annotations

import json
import logging
from typing import Any

from connectors.kafka import clients

log = logging.getLogger("cdckit.progress")

# The broker's default offset.metadata.max.bytes is 4096; a report is a few numbers.
MAX_METADATA = 1024


class ProgressBoard:
    def __init__(self, conf: dict[str, Any], group: str):
        self.conf, self.group = conf, group
        self._consumer = None

    def _client(self, group: str | None = None):
        return clients.consumer(self.conf, group or self.group, auto_offset_reset="earliest")

    def _own(self):
        if self._consumer is None:
            self._consumer = self._client()
        return self._consumer

    def report(self, topic: str, partition: int, position: int, **fields: Any) -> bool:
        """Commit `position` (an offset in the partition) and `fields` for one partition; False
        when the broker did not take it."""
        from confluent_kafka import KafkaException, TopicPartition

        body = json.dumps(fields, separators=(",", ":"))
        if len(body) > MAX_METADATA:
            raise ValueError(f"progress report of {len(body)} bytes (at most {MAX_METADATA})")
        try:
            done = self._own().commit(offsets=[TopicPartition(topic, partition, max(0, int(position)),
                                                              metadata=body)], asynchronous=False)
        except KafkaException as exc:
            log.warning("progress of %s-%s not recorded: %s", topic, partition, exc)
            return False
        refused = [tp.error for tp in done or [] if tp.error is not None]
        if refused:
            log.warning("progress of %s-%s not recorded: %s", topic, partition, refused[0])
        return not refused

    def read(self, partitions: list[tuple[str, int]], timeout_s: float = 10) -> dict[str, dict[str, Any]]:
        """`topic-partition` -> the fields last reported (partitions never reported are absent)."""
        from confluent_kafka import TopicPartition

        if not partitions:
            return {}
        out: dict[str, dict[str, Any]] = {}
        for tp in self._own().committed([TopicPartition(t, p) for t, p in partitions], timeout=timeout_s):
            if tp.offset < 0 or tp.error is not None or not tp.metadata:
                continue
            try:
                out[f"{tp.topic}-{tp.partition}"] = json.loads(tp.metadata)
            except ValueError:
                continue
        return out

    def request_stop(self, anchor: tuple[str, int], on: bool = True) -> None:
        """Ask tasks not yet begun to skip their partition (or take that back). `anchor`: any
        partition of the job (the flag is kept as that partition's commit in the stop group)."""
        from confluent_kafka import TopicPartition

        c = self._client(f"{self.group}-stop")
        try:
            c.commit(offsets=[TopicPartition(anchor[0], anchor[1], 1 if on else 0, metadata="stop" if on else "")],
                     asynchronous=False)
        finally:
            c.close()

    def stop_requested(self, anchor: tuple[str, int], timeout_s: float = 10) -> bool:
        from confluent_kafka import KafkaException, TopicPartition

        c = self._client(f"{self.group}-stop")
        try:
            got = c.committed([TopicPartition(anchor[0], anchor[1])], timeout=timeout_s)
        except KafkaException:
            return False  # cannot tell: go on (a stop is a courtesy; the driver stops after the job)
        finally:
            c.close()
        return bool(got) and got[0].offset == 1 and got[0].metadata == "stop"

    def forget(self) -> None:
        """Delete both groups (a finished job's progress is kept in its own result)."""
        admin = clients.admin(self.conf)
        for future in admin.delete_consumer_groups([self.group, f"{self.group}-stop"], request_timeout=10).values():
            try:
                future.result(10)
            except Exception:  # noqa: BLE001 - a group never created, or already gone
                pass

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
