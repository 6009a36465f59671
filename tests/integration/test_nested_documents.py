"""Nested documents on the local stack: orders with their lines, customer and tags, kept exact by
`cdckit run` through a snapshot, a workload with every hard case (child before its root, moves,
root deleted and re-inserted, a customer rename fanning out, a child table truncated, TOAST in a
child, a link table with a composite key), and a kill -9 of the driver mid-batch; `cdckit verify`
(documents built by SQL in Postgres) says exact, and finds a tampered document."""
import json
import random
import threading
import time
import uuid

import pytest
import redis
import requests

from connectors.debezium_config import MIN_COMPACTION_LAG_MS
from tests.support.integration import (batches_committed, cli, drop_pipeline, fresh_redis_dbs, kill_mid_batch, pg,
                                       start_job, stop_job, wait_batches, wait_for, wait_streaming, write_config)

pytestmark = [pytest.mark.integration, pytest.mark.spark]
LIVE_DB, SPARE_DB = 13, 14
BOOT_LIVE_DB, BOOT_SPARE_DB = 15, 3

BIG = "(SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 400))"  # 12,800 chars, TOASTed


def schema(p: str) -> list[str]:
    return [
        f"CREATE TABLE {p}_customers (id int PRIMARY KEY, name text, email text)",
        f"CREATE TABLE {p}_orders (id bigint PRIMARY KEY, customer_id int, status text, total numeric(20,2), "
        "placed timestamptz)",
        f"CREATE TABLE {p}_lines (id int PRIMARY KEY, order_id bigint, line_no int, sku text, qty int, "
        "price numeric(12,2), note text)",
        f"CREATE TABLE {p}_tags (id int PRIMARY KEY, name text)",
        # The link table: a composite key, and foreign keys the tags relation's joins are inferred from.
        f"CREATE TABLE {p}_order_tags (order_id bigint REFERENCES {p}_orders ON DELETE CASCADE, "
        f"tag_id int REFERENCES {p}_tags ON DELETE CASCADE, PRIMARY KEY (order_id, tag_id))",
    ]


def documents(p: str, name: str, scalar_tags: bool = False) -> list[dict]:
    """`scalar_tags`: pgsync's shapes: the tags as a list of their names, null when an order has none,
    a renamed field (qty: quantity), a configured mapping (lines.sku: keyword) and `_meta`."""
    tags = ({"value": "name"} if scalar_tags else {"columns": ["name"]})
    return [{
        "name": name, "root": f"public.{p}_orders", "index": name, "redis_key": f"{name}:{{id}}",
        **({"null_when_empty": True, "mappings": {"lines.sku": {"type": "keyword"}}, "meta": True}
           if scalar_tags else {}),
        "relations": [
            {"label": "lines", "table": f"public.{p}_lines", "type": "one_to_many", "join": {"order_id": "id"},
             "order_by": "line_no", "columns": ["line_no", "sku", "qty", "price", "note"],
             **({"rename": {"qty": "quantity"}} if scalar_tags else {})},
            {"label": "customer", "table": f"public.{p}_customers", "type": "many_to_one",
             "join": {"customer_id": "id"}, "columns": ["name", "email"]},
            {"label": "tags", "table": f"public.{p}_order_tags", "type": "many_to_many",
             "through": {"table": f"public.{p}_tags"}, **tags},
        ]}]


def test_orders_documents_stay_exact_through_workload_and_driver_kill(stack, tmp_path):
    p = f"nd{uuid.uuid4().hex[:6]}"
    name = f"orders-{p}"
    tables = [f"public.{p}_{t}" for t in ("customers", "orders", "lines", "tags", "order_tags")]
    with pg(stack) as conn:
        for sql in schema(p):
            conn.execute(sql)
        conn.execute(f"INSERT INTO {p}_customers SELECT g, 'customer ' || g, 'c' || g || '@x.org' "
                     "FROM generate_series(1, 20) g")
        conn.execute(f"INSERT INTO {p}_tags SELECT g, 'tag ' || g FROM generate_series(1, 8) g")
        # Orders 151-300 and their customers (11-20) are left alone by the workload: after the
        # rebuild only its own replay of the documents can have brought them into the new generations.
        conn.execute(f"INSERT INTO {p}_orders SELECT g, 1 + g % 10 + CASE WHEN g > 150 THEN 10 ELSE 0 END, 'new', "
                     "9007199254740993.25 + g, now() FROM generate_series(1, 300) g")
        conn.execute(f"INSERT INTO {p}_lines SELECT g, 1 + g % 300, g / 300, 'sku-' || g, g % 7, g * 0.5, NULL "
                     "FROM generate_series(1, 1500) g")
        conn.execute(f"INSERT INTO {p}_order_tags SELECT o, 1 + o % 8 FROM generate_series(1, 300) o")
        conn.execute(f"UPDATE {p}_lines SET note = {BIG} WHERE id IN (5, 6)")
    ckpt = tmp_path / "ckpt"
    own = fresh_redis_dbs(stack, LIVE_DB, SPARE_DB)
    data = stack.config(tables=[{"name": t, "redis_key": f"{t}:{{_id}}"} for t in tables],
                        documents=documents(p, name, scalar_tags=True),
                        redis={"url": own.redis_url, "rebuild_db": SPARE_DB},
                        spark={"checkpoint_dir": str(ckpt), "trigger": "500 ms", "max_offsets_per_trigger": 600})
    # Segments still roll every 2 s, but a record is kept from compaction for cdckit's default 10
    # minutes (min.compaction.lag.ms): the job's catch-up here runs up to a minute behind, and a
    # transaction part of which was compacted away before it was read cannot be shown whole.
    data["kafka"]["topic_config"] = {**data["kafka"]["topic_config"], "min.compaction.lag.ms": MIN_COMPACTION_LAG_MS}
    path = write_config(tmp_path, data)
    log = tmp_path / "job.log"
    stop = threading.Event()
    proc = None

    def workload():
        rnd = random.Random(5)
        with pg(stack) as conn:
            n = 0
            while not stop.is_set():
                with conn.transaction():
                    k = rnd.randint(1, 150)
                    choice = rnd.random()
                    if choice < 0.3:
                        conn.execute(f"UPDATE {p}_lines SET qty = qty + 1 WHERE order_id = %s", (k,))
                    elif choice < 0.45:  # a line moves to another order (never a pair's: see torn())
                        conn.execute(f"UPDATE {p}_lines SET order_id = %s WHERE id = %s AND order_id <= 150 "
                                     "AND sku NOT LIKE 'pair-%%'", (rnd.randint(1, 150), rnd.randint(1, 1500)))
                    elif choice < 0.55:  # a customer rename: every order of theirs
                        conn.execute(f"UPDATE {p}_customers SET name = name || '+' WHERE id = %s", (k % 10 + 1,))
                    elif choice < 0.65:  # an order deleted, then back with its lines still there
                        conn.execute(f"DELETE FROM {p}_orders WHERE id = %s", (k,))
                        conn.execute(f"INSERT INTO {p}_orders VALUES (%s, %s, 're-inserted', 1, now())",
                                     (k, k % 10 + 1))
                    elif choice < 0.75:  # lines written before their order
                        oid = 10_000 + n
                        conn.execute(f"INSERT INTO {p}_lines VALUES (%s, %s, 1, 'early', 1, 1, NULL)",
                                     (100_000 + n, oid))
                        conn.execute(f"INSERT INTO {p}_orders VALUES (%s, 1, 'late root', 2, now())", (oid,))
                    elif choice < 0.85:
                        conn.execute(f"INSERT INTO {p}_order_tags VALUES (%s, %s) ON CONFLICT DO NOTHING",
                                     (k, rnd.randint(1, 8)))
                    elif choice < 0.95:  # two lines of one order in one transaction (in two partitions, mostly)
                        two = conn.execute(f"SELECT id FROM {p}_lines WHERE order_id = %s AND id NOT IN (5, 6) "
                                           "ORDER BY random() LIMIT 2", (k,)).fetchall()
                        if len(two) == 2:
                            conn.execute(f"UPDATE {p}_lines SET sku = %s WHERE id IN (%s, %s)",
                                         (f"pair-{n:07d}", two[0][0], two[1][0]))
                    else:  # a TOASTed line's other column: its note is not in the change
                        conn.execute(f"UPDATE {p}_lines SET sku = sku || '!' WHERE id IN (5, 6)")
                n += 1
                # ~10 transactions/s, each fanning out to many documents: at 0.01 s (~60/s) the
                # documents' rebuild on two cores took ~9 of its 10 minutes to catch up.
                time.sleep(0.08)

    torn: dict[str, set[str]] = {}

    def watch_torn():
        """A document must never show one line of a pair transaction without the other: the newest
        pair in an order's document is on two of its lines (pair lines never move or go)."""
        r = redis.Redis.from_url(own.redis_url)
        keys = [f"{name}:{k}" for k in range(1, 151)]
        try:
            while not stop.is_set():
                for key, raw in zip(keys, r.mget(keys)):
                    if raw is None:
                        continue
                    lines = json.loads(raw)["lines"] or []   # null without lines (null_when_empty)
                    pairs = sorted(line["sku"] for line in lines if line["sku"].startswith("pair-"))
                    if pairs and pairs.count(pairs[-1]) != 2:
                        torn.setdefault(key, set()).add(pairs[-1])
                time.sleep(0.05)
        except Exception as exc:  # noqa: BLE001 - a watcher that died checks nothing: the test fails
            torn["the watcher itself"] = {repr(exc)}

    try:
        assert cli("connector", "apply", "-c", str(path)).returncode == 0
        wait_streaming(stack, data)
        proc = start_job(path, log)
        thread = threading.Thread(target=workload, daemon=True)
        thread.start()
        watcher = threading.Thread(target=watch_torn, daemon=True)
        watcher.start()
        kill_mid_batch(proc, ckpt / "documents" / "query", log, 240)  # returns once its JVM is gone
        restarted_from = batches_committed(ckpt / "documents")
        proc = start_job(path, log)
        # The restarted job carries the workload's changes into the documents before the rebuild.
        wait_batches(ckpt / "documents", restarted_from + 2, proc, log, 240,
                     "documents batches committed after the restart")
        # Both stores rebuilt under load: the documents too, by a state of the rebuild's own, which the
        # running job's documents' query takes over at the switch.
        rebuilt = cli("rebuild", "all", "-c", str(path), "--json", timeout=600)
        assert rebuilt.returncode == 0, rebuilt.stdout[-2000:] + rebuilt.stderr[-2000:]
        summary = json.loads(rebuilt.stdout)
        folder = summary["plan"]["documents"]["folder"]
        assert summary["summary"]["documents"]["documents"] >= 300, summary["summary"]
        assert summary["plan"]["search"][f"document:{name}"]["target"] == f"{name}_v2"
        assert requests.get(f"{stack.search_url}/_alias/{name}", timeout=10).json().keys() == {f"{name}_v2"}
        assert json.loads((ckpt / "cdckit-documents.json").read_text())["folder"] == folder
        # (within a poll once the query's batch sees the new folder; under this load a batch may take a minute)
        wait_for(lambda: "takes over from documents" in log.read_text(), 240, 0.5, "the documents' takeover")
        # The workload goes on over the rebuilt generations for a while; the verify below holds them
        # (orders 151-300, which it never touches, only the rebuild's replay can have written there).
        taken_over = ckpt / folder   # the rebuild's state, which the documents' query now runs from
        wait_batches(taken_over, batches_committed(taken_over) + 2, proc, log, 120,
                     "documents batches committed after the takeover")
        stop.set()
        thread.join()
        watcher.join()
        assert not torn, f"documents seen with half a transaction: {torn}"
        # After the workload: its deletes of an order cascade to the order's links.
        with pg(stack) as conn:
            conn.execute(f"TRUNCATE {p}_order_tags")
            conn.execute(f"INSERT INTO {p}_order_tags VALUES (1, 2)")

        result = cli("verify", "--json", "-c", str(path), "--timeout", "240", timeout=400)
        report = json.loads(result.stdout)
        docs = next(t for t in report["tables"] if t["table"] == f"document:{name}")
        assert report["exact"], (docs, result.stderr[-2000:], log.read_text()[-3000:])
        assert docs["rows"] >= 300

        r = redis.Redis.from_url(own.redis_url)
        one = json.loads(r.get(f"{name}:1"))
        with pg(stack) as conn:
            tags = conn.execute(f"SELECT t.name FROM {p}_order_tags l JOIN {p}_tags t ON t.id = l.tag_id "
                                "WHERE l.order_id = 1 ORDER BY t.id").fetchall()
            lines = conn.execute(f"SELECT count(*) FROM {p}_lines WHERE order_id = 1").fetchone()[0]
        # the truncate emptied the links, then (1, 2); the tags are their names, null where there are none
        assert one["tags"] == [n for (n,) in tags] == ["tag 2"]
        assert json.loads(r.get(f"{name}:2"))["tags"] is None
        # `_meta`: the keys of the rows order 1 is built from (verify compared it for every document)
        with pg(stack) as conn:
            line_ids = [i for (i,) in conn.execute(f"SELECT id FROM {p}_lines WHERE order_id = 1 ORDER BY id")]
            (customer,) = conn.execute(f"SELECT customer_id FROM {p}_orders WHERE id = 1").fetchone()
        assert one["_meta"] == {f"{p}_orders": {"id": [1]}, f"{p}_customers": {"id": [customer]},
                                **({f"{p}_lines": {"id": line_ids}} if line_ids else {}), f"{p}_tags": {"id": [2]},
                                f"{p}_order_tags": {"order_id": [1], "tag_id": [2]}}, one["_meta"]
        holding = requests.post(f"{stack.search_url}/{name}/_search", json={
            "query": {"term": {f"_meta.{p}_tags.id": 2}}, "_source": False, "size": 1000}, timeout=10).json()
        assert "1" in [h["_id"] for h in holding["hits"]["hits"]], holding
        with pg(stack) as conn:
            toasted = conn.execute(f"SELECT order_id, length(note) FROM {p}_lines WHERE id = 5").fetchone()
        assert len(one["lines"]) == lines
        assert all("quantity" in line and "qty" not in line for line in one["lines"])
        mapping = requests.get(f"{stack.search_url}/{name}/_mapping", timeout=10).json()
        lines_props = next(iter(mapping.values()))["mappings"]["properties"]["lines"]["properties"]
        assert lines_props["sku"]["type"] == "keyword" and "quantity" in lines_props
        held = json.loads(r.get(f"{name}:{toasted[0]}"))
        assert any(line["note"] and len(line["note"]) == toasted[1] for line in held["lines"])
        assert "batch" in log.read_text() and "documents batch" in log.read_text()

        # verify finds a tampered document
        requests.post(f"{stack.search_url}/{name}/_doc/2?refresh=true", json={"id": 2, "lines": []}, timeout=10)
        bad = cli("verify", "--json", "-c", str(path), "--table", name, timeout=300)
        assert bad.returncode == 1, bad.stdout
        found = json.loads(bad.stdout)["tables"][0]["stores"]["search"]
        assert [d["id"] for d in found["different"]] == ["2"], found
        three = json.loads(r.get(f"{name}:3"))
        three["_meta"][f"{p}_orders"]["id"] = [99]
        r.set(f"{name}:3", json.dumps(three))
        bad = cli("verify", "--json", "-c", str(path), "--table", name, timeout=300)
        found = json.loads(bad.stdout)["tables"][0]["stores"]["cache"]
        assert found["different"] == [{"id": "3", "field": f"_meta.{p}_orders.id"}], found
    finally:
        stop.set()
        stop_job(proc)
        drop_pipeline(stack, data, *reversed(tables))


def test_bootstrap_once_builds_the_documents_from_the_snapshot(stack, tmp_path):
    """`cdckit bootstrap --once` returns only when the documents hold the snapshot too."""
    p = f"nb{uuid.uuid4().hex[:6]}"
    name = f"orders-{p}"
    tables = [f"public.{p}_{t}" for t in ("customers", "orders", "lines", "tags", "order_tags")]
    with pg(stack) as conn:
        for sql in schema(p):
            conn.execute(sql)
        conn.execute(f"INSERT INTO {p}_customers SELECT g, 'customer ' || g, NULL FROM generate_series(1, 5) g")
        conn.execute(f"INSERT INTO {p}_tags SELECT g, 'tag ' || g FROM generate_series(1, 3) g")
        conn.execute(f"INSERT INTO {p}_orders SELECT g, 1 + g % 5, 'new', g, now() FROM generate_series(1, 400) g")
        conn.execute(f"INSERT INTO {p}_lines SELECT g, 1 + g % 400, g, 'sku', 1, 1, NULL "
                     "FROM generate_series(1, 2000) g")
        conn.execute(f"INSERT INTO {p}_order_tags SELECT o, 1 + o % 3 FROM generate_series(1, 400) o")
    own = fresh_redis_dbs(stack, BOOT_LIVE_DB, BOOT_SPARE_DB)
    # Only the root is listed: the tables only the documents read are captured without an index or
    # keys of their own (documents_only), through the bootstrap, both rebuilds and a re-snapshot.
    data = stack.config(tables=[{"name": f"public.{p}_orders", "redis_key": f"public.{p}_orders:{{_id}}"}],
                        documents=documents(p, name), redis={"url": own.redis_url, "rebuild_db": BOOT_SPARE_DB},
                        spark={"checkpoint_dir": str(tmp_path / "ckpt")})
    path = write_config(tmp_path, data)
    try:
        boot = cli("bootstrap", "--once", "-c", str(path), timeout=600)
        assert boot.returncode == 0, boot.stdout[-2000:] + boot.stderr[-3000:]
        r = redis.Redis.from_url(own.redis_url)
        assert int(r.get(f"cdckit:count:{name}:{{id}}") or 0) == 400   # before verify: bootstrap waited
        result = cli("verify", "--json", "-c", str(path), "--table", name, timeout=300)
        report = json.loads(result.stdout)
        assert report["exact"] and report["tables"][0]["rows"] == 400, report
        assert not [k for k in r.scan_iter(match=f"public.{p}_*", count=1000) if not k.startswith(
            f"public.{p}_orders:".encode())], "a documents-only table got keys"
        aliases = requests.get(f"{stack.search_url}/_alias", timeout=10).json()
        assert not [a for i in aliases.values() for a in i.get("aliases", {}) if a.startswith(f"public_{p}_")
                    and a != f"public_{p}_orders"], "a documents-only table got an index"

        # The documents' definition changes (the customer loses its email): the job refuses the old
        # state, so does a rebuild of one store (both hold the documents); `rebuild all` builds them anew.
        data["documents"][0]["relations"][1]["columns"] = ["name"]
        path = write_config(tmp_path, data)
        refused = cli("run", "-c", str(path), timeout=300)
        assert refused.returncode != 0 and "rebuild all" in refused.stderr + refused.stdout, refused.stderr[-2000:]
        one = cli("rebuild", "cache", "-c", str(path), timeout=300)
        assert one.returncode != 0 and "rebuild all" in one.stderr + one.stdout, one.stderr[-2000:]
        rebuilt = cli("rebuild", "all", "-c", str(path), "--json", timeout=600)
        assert rebuilt.returncode == 0, rebuilt.stdout[-2000:] + rebuilt.stderr[-3000:]
        assert json.loads(r.get(f"{name}:7"))["customer"] == {"name": "customer 3"}
        # (verified below, after the cache rebuild: the index as `rebuild all` left it)

        # A cache rebuild alone swaps in a database it filled with the tables: the documents, kept
        # by their own state, are carried over into it at the switch.
        cache = cli("rebuild", "cache", "-c", str(path), "--json", timeout=600)
        assert cache.returncode == 0, cache.stdout[-2000:] + cache.stderr[-3000:]
        assert json.loads(cache.stdout)["plan"]["documents"] is None
        result = cli("verify", "--json", "-c", str(path), timeout=300)
        report = json.loads(result.stdout)
        assert report["exact"], json.dumps(report)[:3000]
        assert int(r.get(f"cdckit:count:{name}:{{id}}") or 0) == 400

        # The change topics lost: `bootstrap` re-snapshots, and an order deleted while they were
        # gone leaves both stores, its document too (issue #38.4: only the tables were swept).
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": stack.bootstrap_servers})
        prefix = data["topic_prefix"] + "."
        doomed = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix) and t != prefix + "dlq"]
        for fut in admin.delete_topics(doomed).values():
            fut.result(30)
        with pg(stack) as conn:
            conn.execute(f"DELETE FROM {p}_lines WHERE order_id = 400")
            conn.execute(f"DELETE FROM {p}_orders WHERE id = 400")   # its links go with it (cascade)
        again = cli("bootstrap", "--once", "-c", str(path), timeout=600)
        assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-3000:]
        assert "re-snapshotting" in again.stdout + again.stderr
        assert r.get(f"{name}:400") is None
        result = cli("verify", "--json", "-c", str(path), timeout=300)
        report = json.loads(result.stdout)
        assert report["exact"], json.dumps(report)[:3000]
        assert next(t for t in report["tables"] if t["table"] == f"document:{name}")["rows"] == 399
    finally:
        drop_pipeline(stack, data, *reversed(tables))
