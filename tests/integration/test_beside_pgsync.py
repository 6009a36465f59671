"""Side by side with pgsync itself (issue #42): pgsync 7.3.0 from PyPI in a venv of its own and
cdckit on one Postgres and one search engine, each with its own index, from one schema written in
pgsync's format (converted by `cdckit config from-pgsync`): a root with an object child, a list
child with a nested list under it, a scalar child through a link table, renames and mappings.

After the bootstrap every document must be the same in both, pgsync's `_meta` included (converted
with `--meta`; apart from the list order and `_meta`'s value types: docs/coming-from-pgsync.md). After a workload of inserts, updates, deletes and moves of
children between parents, cdckit must match Postgres (`verify` exact), and every document where
pgsync differs from cdckit is a pgsync finding: printed and written to .drills/peer-pgsync.json
with the step of the workload that touched it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import requests
import yaml

from tests.support.integration import ROOT, cli, drop_pipeline, pg, write_config

pytestmark = [pytest.mark.integration, pytest.mark.peer]
PGSYNC = "7.3.0"
QUEUE_DB = 1   # pgsync's own Redis queue (cdckit writes only the index here)


@pytest.fixture(scope="module")
def pgsync_bin() -> Path:
    """pgsync in a venv of its own, installed once per machine (kept under .devstack/peer)."""
    venv = ROOT / ".devstack" / "peer" / f"pgsync-{PGSYNC}"
    if not (venv / "bin" / "pgsync").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=120)
        done = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", f"pgsync=={PGSYNC}"], capture_output=True,
                              text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-2000:]
    return venv / "bin"


def schema(p: str, index: str) -> list[dict]:
    return [{"database": "cdckit", "index": index, "nodes": {
        "table": f"{p}_users", "columns": ["name", "age"],
        "transform": {"rename": {"name": "full_name"}, "mapping": {"full_name": {"type": "keyword"}}},
        "children": [
            {"table": f"{p}_addresses", "label": "address", "columns": ["city"],
             "relationship": {"type": "one_to_one", "variant": "object",
                              "foreign_key": {"child": ["id"], "parent": ["address_id"]}}},
            {"table": f"{p}_posts", "label": "posts", "columns": ["title", "likes"],
             "transform": {"rename": {"title": "headline"}},
             "relationship": {"type": "one_to_many", "variant": "object"},
             "children": [{"table": f"{p}_comments", "label": "comments", "columns": ["content"],
                           "relationship": {"type": "one_to_many", "variant": "object"}}]},
            {"table": f"{p}_tags", "label": "tags", "columns": ["name"],
             "relationship": {"type": "one_to_many", "variant": "scalar", "through_tables": [f"{p}_user_tags"]}},
        ]}}]


def create(conn, p: str) -> None:
    conn.execute(f"CREATE TABLE {p}_addresses (id int PRIMARY KEY, city text)")
    conn.execute(f"CREATE TABLE {p}_users (id int PRIMARY KEY, name text, age int, "
                 f"address_id int REFERENCES {p}_addresses)")
    conn.execute(f"CREATE TABLE {p}_posts (id int PRIMARY KEY, user_id int REFERENCES {p}_users ON DELETE CASCADE, "
                 "title text, likes int)")
    conn.execute(f"CREATE TABLE {p}_comments (id int PRIMARY KEY, post_id int REFERENCES {p}_posts ON DELETE CASCADE, "
                 "content text)")
    conn.execute(f"CREATE TABLE {p}_tags (id int PRIMARY KEY, name text)")
    conn.execute(f"CREATE TABLE {p}_user_tags (user_id int REFERENCES {p}_users ON DELETE CASCADE, "
                 f"tag_id int REFERENCES {p}_tags ON DELETE CASCADE, PRIMARY KEY (user_id, tag_id))")
    conn.execute(f"INSERT INTO {p}_addresses SELECT g, 'city ' || g FROM generate_series(1, 5) g")
    conn.execute(f"INSERT INTO {p}_users SELECT g, 'user ' || g, 20 + g, 1 + g % 5 FROM generate_series(1, 30) g")
    conn.execute(f"INSERT INTO {p}_posts SELECT g, 1 + g % 25, 'post ' || g, g FROM generate_series(1, 80) g")
    conn.execute(f"INSERT INTO {p}_comments SELECT g, 1 + g % 70, 'comment ' || g FROM generate_series(1, 150) g")
    conn.execute(f"INSERT INTO {p}_tags SELECT g, 'tag ' || g FROM generate_series(1, 6) g")
    conn.execute(f"INSERT INTO {p}_user_tags SELECT u, 1 + (u * t) % 6 FROM generate_series(1, 24) u, "
                 "generate_series(1, 2) t ON CONFLICT DO NOTHING")


# Each step: what it does, in pgsync's terms, and its SQL.
WORKLOAD = [
    ("a new user with an address, a post, a comment and a tag", [
        "INSERT INTO {p}_users VALUES (100, 'new user', 40, 2)",
        "INSERT INTO {p}_posts VALUES (1000, 100, 'fresh post', 0)",
        "INSERT INTO {p}_comments VALUES (5000, 1000, 'first!')",
        "INSERT INTO {p}_user_tags VALUES (100, 3)"]),
    ("a post's title and a comment change (list and nested list)", [
        "UPDATE {p}_posts SET title = title || ' (edited)', likes = likes + 1 WHERE id = 7",
        "UPDATE {p}_comments SET content = 'changed' WHERE id = 8"]),
    ("a post moves to another user (one_to_many child changes parent)", [
        "UPDATE {p}_posts SET user_id = 3 WHERE id = 9"]),
    ("a link-table row moves to another user (scalar through_tables)", [
        "UPDATE {p}_user_tags SET user_id = 26 WHERE user_id = 4 AND tag_id = (SELECT min(tag_id) FROM {p}_user_tags "
        "WHERE user_id = 4)"]),
    ("a tag is renamed (a value shared by many documents)", [
        "UPDATE {p}_tags SET name = 'renamed tag' WHERE id = 2"]),
    ("an address changes city (one_to_one object shared by many users)", [
        "UPDATE {p}_addresses SET city = 'moved city' WHERE id = 3"]),
    ("a user moves to another address (one_to_one, the parent's key)", [
        "UPDATE {p}_users SET address_id = 5 WHERE id = 11"]),
    ("a comment and a link row deleted; a user deleted (its posts cascade)", [
        "DELETE FROM {p}_comments WHERE id = 12",
        "DELETE FROM {p}_user_tags WHERE user_id = 6",
        "DELETE FROM {p}_users WHERE id = 20"]),
]


def normalized(doc: dict | None) -> dict | None:
    """Lists compared whatever their order; `_meta`'s values as text (pgsync writes the root's ids
    as strings, the rest as their types; cdckit every one as its column's type)."""
    if doc is None:
        return None

    def norm(v):
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        if isinstance(v, list):
            return sorted((norm(x) for x in v), key=lambda x: json.dumps(x, sort_keys=True, default=str))
        return v

    meta = {table: {col: sorted({str(v) for v in values}) for col, values in keys.items()}
            for table, keys in (doc.get("_meta") or {}).items()}
    return {**norm({k: v for k, v in doc.items() if k != "_meta"}), "_meta": meta}


def documents(search_url: str, index: str) -> dict[str, dict]:
    requests.post(f"{search_url}/{index}/_refresh", timeout=30)
    hits = requests.get(f"{search_url}/{index}/_search", json={"size": 10_000, "query": {"match_all": {}}},
                        timeout=30).json()["hits"]["hits"]
    return {h["_id"]: normalized(h["_source"]) for h in hits}


def settled(search_url: str, index: str, quiet_s: float = 6, limit_s: float = 120) -> dict[str, dict]:
    """The index once it has not changed for `quiet_s` (pgsync says nothing of where it is)."""
    deadline = time.monotonic() + limit_s
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        now = documents(search_url, index)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return now
        time.sleep(1)
    return last or {}


def test_cdckit_and_pgsync_build_the_same_documents_and_cdckit_stays_exact(stack, tmp_path, pgsync_bin):
    p = f"pg{uuid.uuid4().hex[:6]}"
    theirs, ours = f"pgsync-{p}", f"cdckit-{p}"
    tables = [f"public.{p}_{t}" for t in ("user_tags", "comments", "posts", "tags", "users", "addresses")]
    with pg(stack) as conn:
        create(conn, p)
    env = {**os.environ, "PG_HOST": stack.pg_host, "PG_PORT": str(stack.pg_port), "PG_USER": stack.pg_user,
           "OPENSEARCH": "true", "ELASTICSEARCH_URL": stack.search_url, "REDIS_URL": f"{stack.redis_url.rsplit('/', 1)[0]}/{QUEUE_DB}",
           "CHECKPOINT_PATH": str(tmp_path), "LOG_LEVEL": "WARNING"}
    pgsync_schema = tmp_path / "pgsync.json"
    pgsync_schema.write_text(json.dumps(schema(p, theirs)))
    # cdckit's: the same schema, converted (its own index name), over the test stack's connections
    ours_schema = tmp_path / "schema.json"
    ours_schema.write_text(json.dumps(schema(p, ours)))
    data = stack.config(tables=[{"name": f"public.{p}_users"}], sinks=["search"],
                        spark={"checkpoint_dir": str(tmp_path / "ckpt")})
    base = {k: v for k, v in data.items() if k not in ("tables", "documents")}
    base_path = write_config(tmp_path, base, "base.yaml")
    config = tmp_path / "cdckit.yaml"
    daemon = job = None
    findings: list[dict] = []
    try:
        converted = cli("config", "from-pgsync", str(ours_schema), "--base", str(base_path), "--out", str(config),
                        "--meta")
        assert converted.returncode == 0, converted.stderr
        ours_data = yaml.safe_load(config.read_text())

        # Bootstrap both.
        boot = subprocess.run([str(pgsync_bin / "bootstrap"), "--config", str(pgsync_schema)], env=env,
                              capture_output=True, text=True, timeout=300)
        assert boot.returncode == 0, boot.stderr[-3000:]
        once = subprocess.run([str(pgsync_bin / "pgsync"), "--config", str(pgsync_schema)], env=env,
                              capture_output=True, text=True, timeout=300)
        assert once.returncode == 0, once.stderr[-3000:]
        ran = cli("bootstrap", "--once", "-c", str(config), timeout=600)
        assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-3000:]
        mine, pgs = documents(stack.search_url, ours), settled(stack.search_url, theirs)
        assert len(mine) == 30 and set(mine) == set(pgs)
        differ = {i: (mine[i], pgs[i]) for i in mine if mine[i] != pgs[i]}
        assert not differ, json.dumps(dict(list(differ.items())[:3]), indent=1, default=str)

        # The workload, with both running.
        daemon = subprocess.Popen([str(pgsync_bin / "pgsync"), "--config", str(pgsync_schema), "--daemon"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=open(tmp_path / "pgsync.log", "wb"),
                                  start_new_session=True)
        job = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "run", "-c", str(config)], cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=open(tmp_path / "job.log", "wb"),
                               start_new_session=True)
        time.sleep(5)   # both streaming before the first change
        steps: dict[str, list[str]] = {}
        with pg(stack) as conn:
            for what, statements in WORKLOAD:
                before = documents(stack.search_url, ours)
                for sql in statements:
                    conn.execute(sql.format(p=p))
                verified = cli("verify", "--json", "-c", str(config), "--timeout", "120", timeout=300)
                report = json.loads(verified.stdout)
                assert report["exact"], (what, json.dumps(report)[:3000], (tmp_path / "job.log").read_text()[-3000:])
                after = documents(stack.search_url, ours)
                steps[what] = sorted(i for i in set(before) | set(after) if before.get(i) != after.get(i))
        mine, pgs = documents(stack.search_url, ours), settled(stack.search_url, theirs)
        for doc_id in sorted(set(mine) | set(pgs), key=lambda x: int(x)):
            if mine.get(doc_id) != pgs.get(doc_id):
                step = next((w for w, ids in steps.items() if doc_id in ids), "(none of the steps)")
                findings.append({"document": doc_id, "step": step, "postgres_and_cdckit": mine.get(doc_id),
                                 "pgsync": pgs.get(doc_id)})
        # Every difference is on a document the workload touched: pgsync's, not cdckit's (verified).
        assert all(f["step"] != "(none of the steps)" for f in findings), findings
    finally:
        for proc in (daemon, job):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, 9)
        out = ROOT / ".drills" / "peer-pgsync.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps({"pgsync": PGSYNC, "findings": findings}, indent=1, default=str))
        for f in findings:
            print(f"pgsync finding: document {f['document']} after '{f['step']}': pgsync {json.dumps(f['pgsync'])[:300]} "
                  f"vs Postgres {json.dumps(f['postgres_and_cdckit'])[:300]}")
        subprocess.run([str(pgsync_bin / "bootstrap"), "--config", str(pgsync_schema), "--teardown"], env=env,
                       capture_output=True, timeout=120)
        requests.delete(f"{stack.search_url}/{theirs}", timeout=30)
        if "ours_data" in locals():
            drop_pipeline(stack, ours_data, *tables)
