"""Timestamps and times of every precision, as Debezium's adaptive time.precision.mode sends them
(milliseconds up to precision 3, microseconds above and without one): `cdckit verify` must expect
exactly that, so a table with timestamp(3) columns verifies exact, and a wrong value still fails."""
import json
import uuid

import pytest

from tests.support.integration import cli, drop_pipeline, pg, write_config

pytestmark = pytest.mark.integration


def test_every_precision_verifies_exact_and_a_changed_value_does_not(stack, tmp_path):
    import redis

    name = f"prec_{uuid.uuid4().hex[:6]}"
    table = f"public.{name}"
    data = stack.config(tables=[{"name": table, "redis_key": f"{name}:{{id}}", "index": name}],
                        spark={"checkpoint_dir": str(tmp_path / "ckpt"), "trigger": "500 ms"}, metrics_port=0)
    columns = ", ".join([f"ts{p} timestamp({p})" for p in range(7)] + [f"t{p} time({p})" for p in range(7)]
                        + ["ts timestamp", "t time", "tsz3 timestamptz(3)", "tsa3 timestamp(3)[]"])
    with pg(stack) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, {columns})")
        values = ", ".join(["timestamp '2026-03-04 05:06:07.123456' + g * interval '1.000777 s'"] * 7
                           + ["time '05:06:07.123456' + g * interval '1.000777 s'"] * 7
                           + ["timestamp '1999-12-31 23:59:59.999999' - g * interval '1 day'",
                              "time '23:59:59.999999'", "now()",
                              "ARRAY[timestamp '2026-03-04 05:06:07.5678', NULL]"])
        conn.execute(f"INSERT INTO {table} SELECT g, {values} FROM generate_series(1, 50) g")
    path = write_config(tmp_path, data)
    try:
        boot = cli("bootstrap", "--once", "-c", str(path), timeout=400)
        assert boot.returncode == 0, boot.stderr[-3000:]
        verify = cli("verify", "-c", str(path), timeout=300)
        assert verify.returncode == 0, verify.stdout[-3000:] + verify.stderr[-2000:]
        # The check can fail: a stored millisecond value one off is a difference.
        r = redis.Redis.from_url(stack.redis_url)
        doc = json.loads(r.get(f"{name}:7"))
        doc["ts3"] = doc["ts3"][:-1] + ("2" if doc["ts3"].endswith("1") else "1")
        r.set(f"{name}:7", json.dumps(doc))
        wrong = cli("verify", "--json", "-c", str(path), timeout=300)
        assert wrong.returncode == 1 and "\"ts3\"" in wrong.stdout, wrong.stdout[-2000:] + wrong.stderr[-2000:]
    finally:
        drop_pipeline(stack, data, table)
