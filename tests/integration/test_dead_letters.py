"""Bad input: malformed JSON, an unknown op, a null primary key, a mapping conflict (a scalar where
the config maps an object) and an oversized document go to the dead-letter topic with reasons;
schema-ful and schema-less envelopes mix; the rest of the batch, and later batches, are applied.
`cdckit dlq list|replay` after a fix."""
import json
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from pipelines.config import parse_config
from tests.support.integration import cache_docs, cli, drop_connector, pg, search_docs, wait_for, wait_streaming, write_config

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def envelope(table: str, row: dict, op: str = "u", lsn: int = 1 << 40, prev: int | None = None) -> bytes:
    schema, name = table.split(".")
    before, after = (row, None) if op == "d" else (None, row)
    return json.dumps({"op": op, "before": before, "after": after, "source": {
        "schema": schema, "table": name, "lsn": lsn, "snapshot": "false",
        "sequence": json.dumps([str(prev or lsn), str(lsn)]), "ts_ms": int(time.time() * 1000)}}).encode()


def read_all(bootstrap: str, topic: str, timeout_s: float = 5):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "dlq-test", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    out, deadline = [], time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        m = c.poll(0.3)
        if m is not None and m.error() is None:
            out.append(m)
    c.close()
    return out


def test_bad_records_are_dead_lettered_and_the_rest_applied(stack, spark, tmp_path):
    name = f"dlq_{uuid.uuid4().hex[:6]}"
    table = f"public.{name}"
    with pg(stack) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, n int, m text)")
        conn.execute(f"INSERT INTO {table} VALUES (1, 1)")
    data = stack.config(tables=[{"name": table, "redis_key": f"{name}:{{id}}", "index": name,
                                 "mappings": {"n": {"type": "integer"}, "m": {"type": "object"}}}],
                        spark={"checkpoint_dir": str(tmp_path / "ckpt"), "trigger": "1 second"})
    data["search"]["max_document_bytes"] = 2048
    data["redis"]["deleted_version_ttl_s"] = 1
    cfg = parse_config(data)
    topic = cfg.topic_for(cfg.tables[0])
    try:
        assert cli("connector", "apply", "-c", str(write_config(tmp_path, data))).returncode == 0
        wait_streaming(stack, data)
        from pipelines.streaming import job
        query = job.start(spark, cfg)
        wait_for(lambda: "1" in cache_docs(stack, f"{name}:"), 90, 1, "the snapshot row")
        p = Producer({"bootstrap.servers": stack.bootstrap_servers})
        key = json.dumps({"id": 2}).encode()
        p.produce(topic, key=key, value=b"{this is not json")
        p.produce(topic, key=json.dumps({"id": 12}).encode(), value=envelope(table, {"id": 12, "n": 2}, op="x"))
        # A scalar where the config maps an object: index.mapping.ignore_malformed (on every index
        # cdckit creates) keeps a malformed value of a number, date or keyword field unindexed, but
        # an object mapping refuses a concrete value (measured on OpenSearch 2.19.1).
        p.produce(topic, key=json.dumps({"id": 3}).encode(), value=envelope(table, {"id": 3, "n": 3, "m": "three"}))
        p.produce(topic, key=json.dumps({"id": None}).encode(), value=envelope(table, {"id": None, "n": 9}))
        p.produce(topic, key=json.dumps({"id": 7}).encode(),
                  value=envelope(table, {"id": 7, "n": 7, "blob": "x" * 5000}))                 # oversized
        schemaful = {"schema": {"type": "struct"}, "payload": json.loads(envelope(table, {"id": 6, "n": 6}))}
        p.produce(topic, key=json.dumps({"schema": {}, "payload": {"id": 6}}).encode(),
                  value=json.dumps(schemaful).encode())
        p.produce(topic, key=json.dumps({"id": 4}).encode(), value=envelope(table, {"id": 4, "n": 4}))
        p.flush(10)
        with pg(stack) as conn:
            conn.execute(f"INSERT INTO {table} VALUES (5, 5)")

        wait_for(lambda: {"4", "5", "6", "7"} <= set(cache_docs(stack, f"{name}:")) and
                 {"4", "5", "6"} <= set(search_docs(stack, name)), 90, 1, "good records of the batch")
        letters = wait_for(lambda: (lambda m: len(m) >= 5 and m)(
            read_all(stack.bootstrap_servers, cfg.dead_letter_topic)), 60, 0, "dead letters")
        reasons = [dict(m.headers())["cdckit.reason"].decode() for m in letters]
        assert any("not valid JSON" in r for r in reasons), reasons
        assert any("unknown op 'x'" in r for r in reasons), reasons
        assert any("mapper_parsing_exception" in r for r in reasons), reasons
        # (A record without a key cannot reach a compacted topic: the broker refuses it, see
        # test_compaction; the decoder's refusal is unit-tested.)
        assert any("key column is null" in r for r in reasons), reasons
        assert any("above search.max_document_bytes" in r for r in reasons), reasons
        assert "7" not in search_docs(stack, name)
        for m in letters:
            h = {k: v.decode() for k, v in m.headers()}
            assert h["cdckit.source.topic"] == topic and int(h["cdckit.source.offset"]) >= 0
        bad_json = next(m for m in letters if "not valid JSON" in dict(m.headers())["cdckit.reason"].decode())
        assert bad_json.value() == b"{this is not json"  # the original record, for replay after a fix
        # Two updates of key 8 in one transaction (one search version), the first oversized; key 9
        # oversized, then deleted. Replaying must leave 8's later image and no 9 (Redis forgets 9's
        # deleted version after 1 s here).
        txn = (1 << 40) + 100
        p.produce(topic, key=json.dumps({"id": 8}).encode(),
                  value=envelope(table, {"id": 8, "n": 81, "blob": "x" * 5000}, lsn=txn + 1, prev=txn))
        p.produce(topic, key=json.dumps({"id": 9}).encode(),
                  value=envelope(table, {"id": 9, "n": 9, "blob": "y" * 5000}, lsn=txn + 3, prev=txn))
        p.flush(10)
        wait_for(lambda: len(read_all(stack.bootstrap_servers, cfg.dead_letter_topic, 2)) >= len(letters) + 2, 60, 0,
                 "letters of 8 and 9")
        p.produce(topic, key=json.dumps({"id": 8}).encode(), value=envelope(table, {"id": 8, "n": 82}, lsn=txn + 2, prev=txn))
        p.produce(topic, key=json.dumps({"id": 9}).encode(),
                  value=envelope(table, {"id": 9}, op="d", lsn=txn + 20, prev=txn + 10))
        p.produce(topic, key=json.dumps({"id": 9}).encode(), value=None)
        p.flush(10)
        wait_for(lambda: search_docs(stack, name).get("8", {}).get("n") == 82 and
                 "9" not in cache_docs(stack, f"{name}:"), 60, 1, "8 updated and 9 deleted")
        letters = read_all(stack.bootstrap_servers, cfg.dead_letter_topic)
        assert query.isActive
        query.stop()
        time.sleep(1.5)

        # `dlq list` shows them; after a fix (a larger document limit) `dlq replay` applies what now
        # fits and reports what still fails.
        listed = cli("dlq", "list", "--json", "-c", str(write_config(tmp_path, data)))
        assert listed.returncode == 0, listed.stderr
        shown = json.loads(listed.stdout)
        assert shown["count"] == len(letters) and all(x["reason"] for x in shown["letters"])
        data["search"]["max_document_bytes"] = 1 << 20
        replayed = cli("dlq", "replay", "--json", "-c", str(write_config(tmp_path, data)))
        result = json.loads(replayed.stdout)
        assert replayed.returncode == 1  # some letters are beyond any fix
        assert result["settled_below"] == 0  # the first letter (not JSON) still fails: none is settled
        assert search_docs(stack, name)["7"]["blob"] == "x" * 5000
        # The letters of 8 and 9 were replaced by their keys' newest records (pipelines/ops/dead_letter_replay.py).
        assert search_docs(stack, name)["8"]["n"] == 82 and cache_docs(stack, f"{name}:")["8"]["n"] == 82
        assert "9" not in search_docs(stack, name) and "9" not in cache_docs(stack, f"{name}:")
        still = " ".join(f["reason"] for f in result["still_failing"])
        assert "not valid JSON" in still and "mapper_parsing_exception" in still and "key column is null" in still
    finally:
        for q in spark.streams.active:
            q.stop()
        drop_connector(stack, data)


def test_a_refused_document_is_written_again_from_postgres_by_replay(stack, spark, tmp_path):
    """Issue #38.5: a nested document's letter has no change record to replay; `dlq replay` builds
    the document again in Postgres and writes it at the letter's version, even without values."""
    p = f"dd{uuid.uuid4().hex[:6]}"
    name, orders, lines = f"orders-{p}", f"public.{p}_orders", f"public.{p}_lines"
    with pg(stack) as conn:
        conn.execute(f"CREATE TABLE {orders} (id int PRIMARY KEY, status text)")
        conn.execute(f"CREATE TABLE {lines} (id int PRIMARY KEY, order_id int REFERENCES {orders}, note text)")
        conn.execute(f"INSERT INTO {orders} SELECT g, 'new' FROM generate_series(1, 3) g")
        conn.execute(f"INSERT INTO {lines} SELECT g, g, 'short' FROM generate_series(1, 3) g")
    data = stack.config(
        tables=[{"name": orders, "redis_key": f"{p}o:{{id}}"}, {"name": lines, "redis_key": f"{p}l:{{id}}"}],
        documents=[{"name": name, "root": orders, "index": name, "redis_key": f"{name}:{{id}}",
                    "relations": [{"label": "lines", "table": lines, "type": "one_to_many",
                                   "join": {"order_id": "id"}, "columns": ["note"]}]}],
        spark={"checkpoint_dir": str(tmp_path / "ckpt"), "trigger": "1 second"}, dlq={"include_values": False})
    data["search"]["max_document_bytes"] = 2048
    cfg = parse_config(data)
    path = write_config(tmp_path, data)
    query = None
    try:
        assert cli("connector", "apply", "-c", str(path)).returncode == 0
        wait_streaming(stack, data)
        from pipelines.streaming import job
        query = job.start(spark, cfg)
        wait_for(lambda: {"1", "2", "3"} <= set(search_docs(stack, name)), 90, 1, "the documents of the snapshot")
        with pg(stack) as conn:   # order 1's document outgrows the limit; order 3 changes, and 2 goes
            conn.execute(f"UPDATE {lines} SET note = repeat('x', 5000) WHERE id = 1")
            conn.execute(f"UPDATE {orders} SET status = 'paid' WHERE id = 3")
        wait_for(lambda: search_docs(stack, name)["3"]["status"] == "paid", 60, 1, "order 3 paid")
        letters = wait_for(lambda: (lambda m: [x for x in m if dict(x.headers())["cdckit.source.topic"]
                                               == f"document:{name}".encode()] or None)(
            read_all(stack.bootstrap_servers, cfg.dead_letter_topic, 2)), 60, 0, "the document's letter")
        assert dict(letters[0].headers()).get("cdckit.version") and letters[0].value() is None
        assert search_docs(stack, name)["1"]["lines"] == [{"note": "short"}]   # the refused write left it
        # Both queries through the changes before the tables' one stops: the verify below waits for the
        # pipeline to have applied the topics' ends (the tables' query can trail the documents' one).
        from pipelines.ops.verify_tables import wait_applied
        wait_applied(cfg, 120)
        query.stop()
        query = None

        data["search"]["max_document_bytes"] = 1 << 20   # the fix
        replayed = cli("dlq", "replay", "--json", "-c", str(write_config(tmp_path, data)))
        assert replayed.returncode == 0, replayed.stdout[-2000:] + replayed.stderr[-2000:]
        assert search_docs(stack, name)["1"]["lines"] == [{"note": "x" * 5000}]
        result = cli("verify", "--json", "-c", str(path), timeout=300)
        assert result.returncode == 0, result.stdout[-3000:]
    finally:
        if query is not None:
            query.stop()
        for q in spark.streams.active:
            q.stop()
        drop_connector(stack, data)
