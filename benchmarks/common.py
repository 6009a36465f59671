"""Shared by the benchmarks: a local stack of their own, synthetic Debezium topics, JSON output."""
from __future__ import annotations

import json
import os
import platform
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
BENCH_PORTS = {"postgres": 55732, "kafka": 59392, "connect": 58383, "redis": 56679, "search": 59500, "spark": 57277}


@contextmanager
def bench_stack(keep: bool = False) -> Iterator:
    from pipelines.devstack import stack
    from pipelines.devstack.settings import StackSettings

    settings = StackSettings(state_dir=ROOT / ".devstack-bench", ports=dict(BENCH_PORTS))
    stack.up(settings, say=lambda line: print(line, flush=True))
    try:
        yield settings
    finally:
        if not keep:
            stack.down(settings, say=lambda _: None)


def synthetic_topic(bootstrap: str, events: int, keys: int, partitions: int, table: str = "public.bench") -> str:
    """Debezium-shaped change events (inserts then updates, some deletes + tombstones)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"bench{uuid.uuid4().hex[:6]}.{table}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(15)
    schema, name = table.split(".")
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 1_000_000, "compression.type": "lz4"})
    lsn = 1 << 30
    for i in range(events):
        k = i % keys
        lsn += 100
        key = json.dumps({"id": k}).encode()
        op = "c" if i < keys else ("d" if i % 97 == 0 else "u")
        row = {"id": k, "name": f"customer {k} ünïcødé", "email": f"c{k}@example.com", "balance": f"{i}.25",
               "tags": [k % 7, k % 11], "updated_at": "2026-11-22T10:00:00.000000Z", "seq": i,
               # as Debezium sends a date, a timestamp and a jsonb (typed by BENCH_COLUMNS' types)
               "born": 7000 + k % 9000, "seen": 1_763_805_600_000_000 + i, "doc": json.dumps({"tier": k % 3, "n": i})}
        value = json.dumps({"before": None, "after": None if op == "d" else row, "op": op, "ts_ms": 0,
                            "source": {"schema": schema, "table": name, "lsn": lsn, "snapshot": "false",
                                       "sequence": json.dumps([str(lsn - 50), str(lsn)]), "ts_ms": 0}}).encode()
        while True:
            try:
                p.produce(topic, key=key, value=value, partition=k % partitions)
                break
            except BufferError:
                p.poll(0.1)
        if op == "d":
            p.produce(topic, key=key, value=None, partition=k % partitions)
    p.flush(120)
    return topic


# The synthetic rows' columns, for the table the benchmarks create so the pipeline types its documents.
BENCH_COLUMNS = ("id bigint PRIMARY KEY, name text, email text, balance numeric(14,2), tags int[], updated_at timestamptz, "
                 "seq bigint, born date, seen timestamp, doc jsonb")


def create_bench_table(settings, table: str = "public.bench", present: bool = True) -> None:
    """present=False drops it: documents of its topic are then untyped (no types in the catalog)."""
    import psycopg

    with psycopg.connect(host="127.0.0.1", port=settings.ports["postgres"], dbname="cdckit", user="postgres",
                         autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        if present:
            conn.execute(f"CREATE TABLE {table} ({BENCH_COLUMNS})")


def write_result(name: str, result: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    result = {"benchmark": name, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "machine": {"cpus": os.cpu_count(), "python": platform.python_version()}, **result}
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(result, indent=2))
    print(f"wrote {path}")
    return path
