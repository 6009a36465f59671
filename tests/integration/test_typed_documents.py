"""Documents people can query (issue #15): a table with every type the stores render. The index
maps dates and timestamps as `date` and jsonb as an object; a range query on a date and a term
query on a jsonb field return the rows Postgres returns; Redis holds the same values, in the JSON
and the hash format, as Postgres itself renders them (to_char, ::text: not through cdckit's code);
live changes, a NULL and a change of every kind keep it so, and `verify` agrees."""
from __future__ import annotations

import base64
import json
import signal
import uuid
from decimal import Decimal

import pytest
import redis
import requests

from tests.support.integration import cli, drop_pipeline, pg, start_job, wait_for, write_config

pytestmark = pytest.mark.integration
ROWS = 60

COLUMNS = """id int PRIMARY KEY, d date, ts timestamp, ts3 timestamp(3), tstz timestamptz, t time, ttz timetz,
j jsonb, js json, h hstore, num numeric(14,2), numn numeric(14,2), big bigint, dbl double precision,
flag boolean, u uuid, b bytea, iv interval, txt text, ds date[], tags text[]"""
VALUES = """g, date '2026-01-01' + g, timestamp '2026-01-01 10:00:00.123456' + g * interval '1 hour',
timestamp '2026-01-01 10:00:00.5' + g * interval '1 day', timestamptz '2026-01-01 10:00:00.25+02' + g * interval '1 day',
time '10:00:00.000001' + g * interval '1 minute', timetz '10:00:00+02',
jsonb_build_object('kind', CASE WHEN g % 2 = 0 THEN 'even' ELSE 'odd' END, 'n', g, 'big', 9007199254740993 + g,
                   'nested', jsonb_build_object('list', jsonb_build_array(g, g + 0.5, NULL))),
json_build_object('tags', json_build_array('a', 'b' || g)), hstore('k', g::text), 1234567890.12 + g, 1000.5 + g, 9007199254740993 + g, g * 0.1,
g % 3 = 0, md5(g::text)::uuid, decode(lpad(to_hex(g), 4, '0'), 'hex'), g * interval '1 day 2 hours',
'row ' || g, ARRAY[date '2000-02-29' + g, NULL], ARRAY['a', 'b ' || g]"""


def _expected(stack, table: str) -> dict[str, dict]:
    """Each row as the documents must hold it, rendered by Postgres."""
    with pg(stack) as conn:
        rows = conn.execute(f"""SELECT id, to_char(d, 'YYYY-MM-DD'), to_char(ts, 'YYYY-MM-DD"T"HH24:MI:SS.US'),
            to_char(ts3, 'YYYY-MM-DD"T"HH24:MI:SS.MS'), to_char(tstz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'),
            to_char(t, 'HH24:MI:SS.US'), j::text, js::text, hstore_to_json(h)::text, num::text, numn::text, big,
            dbl::text, flag, u::text, encode(b, 'base64'), txt,
            CASE WHEN ds IS NOT NULL THEN array_to_json(array(SELECT to_char(x, 'YYYY-MM-DD') FROM unnest(ds) x))::text
            END, tags
            FROM {table}""").fetchall()
    out = {}
    for (id_, d, ts, ts3, tstz, t, j, js, h, num, numn, big, dbl, flag, u, b, txt, ds, tags) in rows:
        out[str(id_)] = dict(id=id_, d=d, ts=_trim(ts), ts3=_trim(ts3), tstz=tstz, t=_trim(t), j=_json(j),
                             js=_json(js), h=_json(h), num=num, numn=numn and Decimal(numn), big=big, dbl=dbl,
                             flag=flag, u=u, b=b and b.replace("\n", ""), txt=txt, ds=_json(ds), tags=tags)
    return out


def _json(text: str | None):
    return None if text is None else json.loads(text)


def _trim(text: str | None) -> str | None:
    """A fraction of zeros is left out; 'HH:MM:SS.000' -> 'HH:MM:SS'."""
    if text is None or "." not in text:
        return text
    whole, fraction = text.rsplit(".", 1)
    return whole if not fraction.strip("0") else text


def _same_doc(doc: dict, want: dict, hash_format: bool = False) -> list[str]:
    bad = []
    for field, value in want.items():
        got = doc.get(field)
        if hash_format and value is None:
            ok = got == ""
        elif field == "tstz":
            ok = got is None if value is None else got.endswith("Z") and _instant(got) == _instant(value + "Z")
        elif field == "numn":
            ok = got is None if value is None else Decimal(str(got)) == value and (hash_format or isinstance(got, float))
        elif field == "dbl":
            ok = got is None if value is None else float(got) == float(value)
        elif hash_format:
            ok = got == _hash(value)
        else:
            ok = got == value
        if not ok:
            bad.append(f"{field}: {got!r} != {value!r}")
    return bad


def _instant(text: str):
    import datetime as dt

    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _hash(value) -> str:
    """The hash format's documented rendering: strings as they are, NULL as '', others as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


def _search(stack, index: str, query: dict) -> set[str]:
    requests.post(f"{stack.search_url}/{index}/_refresh", timeout=10)
    resp = requests.post(f"{stack.search_url}/{index}/_search", timeout=30, json={"size": 1000, "query": query})
    assert resp.ok, resp.text[:500]
    return {h["_id"] for h in resp.json()["hits"]["hits"]}


def _ids(stack, sql: str) -> set[str]:
    with pg(stack) as conn:
        return {str(r[0]) for r in conn.execute(sql).fetchall()}


def test_every_type_is_queryable_and_both_stores_hold_the_databases_values(stack, tmp_path):
    name = f"typed_{uuid.uuid4().hex[:6]}"
    table, hashed = f"public.{name}", f"public.{name}_h"
    data = stack.config(tables=[{"name": table, "redis_key": f"{name}:{{id}}", "index": name,
                                 "numeric_as_number": ["numn"]},
                                {"name": hashed, "redis_key": f"{name}h:{{id}}", "index": f"{name}_h",
                                 "redis_format": "hash", "numeric_as_number": ["numn"]}],
                        spark={"checkpoint_dir": str(tmp_path / "ckpt"), "trigger": "500 ms"}, metrics_port=0)
    with pg(stack) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS hstore")
        for t in (table, hashed):
            conn.execute(f"CREATE TABLE {t} ({COLUMNS})")
            conn.execute(f"INSERT INTO {t} SELECT {VALUES} FROM generate_series(1, {ROWS}) g")
            conn.execute(f"INSERT INTO {t} (id) VALUES (0)")  # every value NULL
    path = write_config(tmp_path, data)
    job = start_job(path, tmp_path / "job.log", command="bootstrap")
    try:
        wait_for(lambda: "snapshot applied" in (tmp_path / "job.log").read_text(), 300, 2, "the snapshot applied")
        verify = cli("verify", "--json", "-c", str(path), timeout=300)
        assert verify.returncode == 0, verify.stdout[-2000:] + cli("dlq", "list", "--json", "-c", str(path)).stdout[-3000:]
        with pg(stack) as conn:
            for t in (table, hashed):
                conn.execute(f"UPDATE {t} SET d = d + 400, j = j || '{{\"kind\": \"changed\"}}', numn = -numn, "
                             f"ts = NULL WHERE id % 5 = 0")
                conn.execute(f"INSERT INTO {t} SELECT {VALUES} FROM generate_series({ROWS + 1}, {ROWS + 5}) g")
                conn.execute(f"DELETE FROM {t} WHERE id IN (3, 4)")
        verify = cli("verify", "--json", "-c", str(path), timeout=300)
        assert verify.returncode == 0, verify.stdout[-2000:] + cli("dlq", "list", "--json", "-c", str(path)).stdout[-3000:]

        # The index: dates as `date`, jsonb as an object, whatever mapped them (derived or dynamic).
        mapping = requests.get(f"{stack.search_url}/{name}/_mapping", timeout=10).json()
        fields = next(iter(mapping.values()))["mappings"]["properties"]
        for f in ("d", "ts", "ts3", "tstz"):
            assert fields[f]["type"] == "date", (f, fields[f])
        assert "properties" in fields["j"] or fields["j"].get("type") in ("object", "flattened", "flat_object"), fields["j"]
        assert fields["numn"]["type"] in ("scaled_float", "double", "float"), fields["numn"]

        # Queries return what Postgres returns.
        assert _search(stack, name, {"range": {"d": {"gte": "2026-01-10", "lt": "2026-02-01"}}}) == \
            _ids(stack, f"SELECT id FROM {table} WHERE d >= '2026-01-10' AND d < '2026-02-01'")
        assert _search(stack, name, {"range": {"tstz": {"gte": "2026-01-20T00:00:00Z"}}}) == \
            _ids(stack, f"SELECT id FROM {table} WHERE tstz >= '2026-01-20T00:00:00Z'")
        assert _search(stack, name, {"term": {"j.n": 7}}) == _ids(stack, f"SELECT id FROM {table} WHERE j->'n' = '7'")
        assert _search(stack, name, {"match": {"j.kind": "changed"}}) == \
            _ids(stack, f"SELECT id FROM {table} WHERE j->>'kind' = 'changed'")
        assert _search(stack, name, {"range": {"numn": {"lt": 0}}}) == _ids(stack, f"SELECT id FROM {table} WHERE numn < 0")

        # Both stores hold Postgres's own renderings.
        r = redis.Redis.from_url(stack.redis_url)
        want = _expected(stack, table)
        assert want["0"]["d"] is None and len(want) == ROWS + 4
        docs = {k: json.loads(r.get(f"{name}:{k}")) for k in want}
        bad = {k: _same_doc(docs[k], w) for k, w in want.items() if _same_doc(docs[k], w)}
        assert not bad, list(bad.items())[:3]
        indexed = {h["_id"]: h["_source"] for h in requests.post(
            f"{stack.search_url}/{name}/_search", timeout=30, json={"size": 1000}).json()["hits"]["hits"]}
        assert indexed == docs
        assert r.get(f"{name}:3") is None
        want_h = _expected(stack, hashed)
        hashes = {k: {f.decode(): v.decode() for f, v in r.hgetall(f"{name}h:{k}").items()} for k in want_h}
        bad = {k: _same_doc(hashes[k], w, hash_format=True) for k, w in want_h.items()
               if _same_doc(hashes[k], w, hash_format=True)}
        assert not bad, list(bad.items())[:3]
        assert base64.b64decode(docs["7"]["b"]) == bytes.fromhex("0007")
    finally:
        job.send_signal(signal.SIGTERM)
        job.wait(180)
        drop_pipeline(stack, data, table, hashed)
