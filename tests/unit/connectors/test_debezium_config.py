import re

from connectors.debezium_config import diff
from pipelines.ops.connector_admin import masked, wanted_config
from pipelines.config import parse_config
from tests.support.configs import BASE, with_


def test_generated_config_carries_what_the_sync_relies_on():
    cfg = parse_config(BASE)
    c = wanted_config(cfg)
    assert c["plugin.name"] == "pgoutput"
    assert c["snapshot.mode"] == "initial"
    assert c["tombstones.on.delete"] == "true"
    # Debezium's keyless truncate event would fail the task on a compacted topic: truncates travel
    # as keyed rows of the captured marker table instead.
    assert c["skipped.operations"] == "t"
    assert c["topic.creation.default.cleanup.policy"] == "compact"
    assert c["table.include.list"] == ("public.customers,public.cdckit_signal,public.cdckit_heartbeat,"
                                       "public.cdckit_truncates")
    assert c["signal.data.collection"] == "public.cdckit_signal"
    assert int(c["heartbeat.interval.ms"]) > 0 and "cdckit_heartbeat" in c["heartbeat.action.query"]
    assert c["key.converter.schemas.enable"] == "false"
    # Unchanged TOAST values are re-read from the table, NULLs never.
    assert c["reselector.type"].endswith("ReselectColumnsPostProcessor") and c["post.processors"] == "reselector"
    assert (c["reselector.reselect.unavailable.values"], c["reselector.reselect.null.values"]) == ("true", "false")
    assert all(isinstance(v, str) for v in c.values())
    assert "database.password" not in c


def test_the_password_reaches_connect_as_a_reference_its_worker_resolves(monkeypatch, tmp_path):
    monkeypatch.setenv("PGPW", "pa55-w0rd")
    c = wanted_config(parse_config(with_("postgres.password", {"env": "PGPW"})))
    assert c["database.password"] == "${env:PGPW}" and "pa55-w0rd" not in repr(c)
    assert masked(c)["database.password"] == "${env:PGPW}"  # a reference is no secret
    (tmp_path / "pg_password").write_text("pa55-w0rd")
    from_file = parse_config(with_("postgres.password", {"file": str(tmp_path / "pg_password")}))
    assert wanted_config(from_file)["database.password"] == f"${{dir:{tmp_path}:pg_password}}"
    data = with_("postgres.password", {"env": "PGPW"})
    data["connect"]["password_reference"] = "${file:/etc/connect/secrets.properties:pg}"
    assert wanted_config(parse_config(data))["database.password"] == "${file:/etc/connect/secrets.properties:pg}"


def test_inline_password_only_when_asked_and_masked_when_shown(monkeypatch):
    monkeypatch.setenv("PGPW", "pa55-w0rd")
    data = with_("postgres.password", {"env": "PGPW"})
    data["connect"]["secrets"] = "inline"
    c = wanted_config(parse_config(data))
    assert c["database.password"] == "pa55-w0rd"
    shown = masked(c)
    assert shown["database.password"] == "****"
    assert "pa55-w0rd" not in repr(shown)


def test_a_password_reference_must_be_one():
    import pytest

    from pipelines.errors import ConfigError

    data = with_("connect.password_reference", "hunter2")
    with pytest.raises((ConfigError, ValueError), match="password_reference"):
        parse_config(data)


def test_diff_ignores_name_and_reports_changes():
    wanted = {"a": "1", "b": "2"}
    assert diff({"name": "x", "a": "1", "b": "2"}, wanted) == []
    assert diff(None, wanted) == [("a", None, "1"), ("b", None, "2")]
    assert diff({"a": "1", "b": "3", "c": "9"}, wanted) == [("b", "3", "2"), ("c", "9", None)]


def test_topic_config_reaches_the_topics_debezium_creates():
    cfg = parse_config(with_("kafka.topic_config", {"segment.ms": 1000, "min.cleanable.dirty.ratio": 0.01}))
    c = wanted_config(cfg)
    assert c["topic.creation.default.segment.ms"] == "1000"
    assert c["topic.creation.default.min.cleanable.dirty.ratio"] == "0.01"
    assert c["topic.creation.default.cleanup.policy"] == "compact"


def test_transactions_are_described_and_changes_stay_uncompacted_for_a_while():
    """The nested documents fold whole transactions (pipelines/apply/transaction_gate.py): every change
    names its transaction, END records count them in a one-partition topic trimmed by time, and a
    record is not compacted away before a job a few minutes behind has read it."""
    assert "provide.transaction.metadata" not in wanted_config(parse_config(BASE))   # no documents: off
    data = with_("documents", [{"name": "orders", "root": "public.customers", "relations": [
        {"label": "self", "table": "public.customers", "type": "many_to_one", "join": {"id": "id"}}]}])
    c = wanted_config(parse_config(data))
    assert c["provide.transaction.metadata"] == "true"
    prefix = c["topic.prefix"]
    assert c["topic.transaction"] == "transaction" and c["topic.creation.groups"] == "transactions"
    assert re.fullmatch(c["topic.creation.transactions.include"], f"{prefix}.transaction")
    assert not re.fullmatch(c["topic.creation.transactions.include"], f"{prefix}.public.customers")
    assert (c["topic.creation.transactions.partitions"], c["topic.creation.transactions.cleanup.policy"]) == ("1", "delete")
    assert c["topic.creation.default.min.compaction.lag.ms"] == "600000"
    fast = wanted_config(parse_config(with_("kafka.topic_config", {"min.compaction.lag.ms": 0})))
    assert fast["topic.creation.default.min.compaction.lag.ms"] == "0"   # the user's setting wins
