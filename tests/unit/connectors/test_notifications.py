"""Debezium's notifications (connectors/kafka/notifications.py): the signal ids whose incremental
snapshot completed, with or without the converter's schema envelope; nothing else counts."""
import json

from connectors.kafka.notifications import completed


def note(id_: str, type_: str, aggregate: str = "Incremental Snapshot", envelope: bool = False) -> tuple:
    body = {"id": id_, "type": type_, "aggregate_type": aggregate, "additional_data": {"data_collections": "public.t"}}
    if envelope:
        body = {"schema": {"type": "struct"}, "payload": body}
    return json.dumps({"id": id_}).encode(), json.dumps(body).encode()


def test_only_completed_incremental_snapshots_count():
    records = [note("a", "STARTED"), note("a", "IN_PROGRESS"), note("b", "COMPLETED", envelope=True),
               note("c", "COMPLETED", aggregate="Initial Snapshot"), note("a", "COMPLETED"),
               note("d", "ABORTED"), (b"{}", None), (b"{}", b"not json")]
    assert completed(records) == {"a", "b"}
