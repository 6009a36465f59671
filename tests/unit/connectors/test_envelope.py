import json

import pytest
from hypothesis import given, strategies as st

from connectors.envelope import RecordError, Tombstone, decode, document_id, version_of
from derived.change import Position, Version
from derived.reduce import last_per_key

POS = Position("cdc.public.t", 0, 7)


def envelope(op="c", after=None, before=None, lsn=100, seq=(50, 100), snapshot="false", schema=False):
    body = {"op": op, "after": after, "before": before,
            "source": {"schema": "public", "table": "t", "lsn": lsn, "snapshot": snapshot, "ts_ms": 1,
                       "sequence": json.dumps([None if seq[0] is None else str(seq[0]), str(seq[1])])}}
    if schema:
        body = {"schema": {"type": "struct"}, "payload": body}
    return json.dumps(body).encode()


KEY = json.dumps({"id": 5}).encode()


@pytest.mark.parametrize("schema", [False, True])
@pytest.mark.parametrize("op", ["c", "u", "r"])
def test_upserts_with_and_without_schemas(op, schema):
    ch = decode(KEY, envelope(op, after={"id": 5, "n": "x"}, schema=schema), POS)
    assert (ch.op, ch.doc_id, ch.row, ch.table) == ("upsert", "5", {"id": 5, "n": "x"}, "public.t")


def test_delete_tombstone_truncate():
    assert decode(KEY, envelope("d", before={"id": 5}), POS).op == "delete"
    assert isinstance(decode(KEY, None, POS), Tombstone)
    t = decode(None, envelope("t"), POS)
    assert t.op == "truncate" and t.doc_id == ""


def test_truncate_marker_row_is_the_named_tables_truncate():
    from tests.support.records import MARKERS, truncate_marker

    k, v = truncate_marker(lsn=300, prev_commit=250, table="public.items")
    t = decode(k, v, POS, truncate_table=MARKERS)
    assert (t.op, t.table, t.doc_id, t.version) == ("truncate", "public.items", "", Version(250, 1, 300))
    # Without knowing the marker table it is a plain row of that table.
    assert decode(k, v, POS).op == "upsert"
    # Snapshot reads and deletes of marker rows are no new truncate.
    for op, snapshot in (("r", "true"), ("d", "false")):
        k, v = truncate_marker(lsn=300, prev_commit=250, op=op, snapshot=snapshot)
        assert decode(k, v, POS, truncate_table=MARKERS) is None


def test_truncate_marker_without_a_table_name_is_a_record_error():
    from tests.support.records import MARKERS, truncate_marker

    k, v = truncate_marker(lsn=300, prev_commit=250, table="nodot")
    with pytest.raises(RecordError, match="truncate marker"):
        decode(k, v, POS, truncate_table=MARKERS)


@pytest.mark.parametrize("column,placeholder", [
    ("text", "__debezium_unavailable_value"),
    ("jsonb", "__debezium_unavailable_value"),
    ("bytea", "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="),
    ("int_array", list(b"__debezium_unavailable_value")),
    ("bigint_array", list(b"__debezium_unavailable_value")),
    ("text_array", ["__debezium_unavailable_value"]),
    ("uuid_array", ["b68a35a7-17ad-35b3-af2a-ae46edb4545a"]),
    ("hstore_json", '{"__debezium_unavailable_value":"__debezium_unavailable_value"}'),
    ("hstore_map", {"__debezium_unavailable_value": "__debezium_unavailable_value"}),
])
def test_toast_placeholder_of_every_type_is_not_data(column, placeholder):
    # Debezium renders the placeholder in the column's own type; none of them is a value to store.
    after = {"id": 5, column: placeholder, "n": 1, "b": "X19kZWJl", "ints": [95, 95, 100]}
    ch = decode(KEY, envelope("u", after=after), POS)
    assert ch.unavailable == (column,) and column not in ch.row and ch.row["ints"] == [95, 95, 100]


def test_toast_placeholder_is_not_data():
    ch = decode(KEY, envelope("u", after={"id": 5, "big": "__debezium_unavailable_value", "n": 1}), POS)
    assert ch.unavailable == ("big",) and "big" not in ch.row


@pytest.mark.parametrize("op", ["r", "u"])
def test_a_multidimensional_array_debezium_could_not_render_is_read_again(op):
    # int4[][] arrives as a list of nulls, text[][] as Java's names of the inner arrays (Debezium 3.x).
    after = {"id": 5, "grid": [None, None], "words": ["[Ljava.lang.String;@1b2c3d", "[Ljava.lang.String;@4e5f"],
             "ok": [1, None], "empty": [], "note": "[Ljava.lang.String;@1"}
    ch = decode(KEY, envelope(op, after=after, snapshot="true" if op == "r" else "false"), POS)
    assert ch.reread and ch.unavailable == ("grid", "words")
    assert ch.row == {"id": 5, "ok": [1, None], "empty": [], "note": "[Ljava.lang.String;@1"}
    plain = decode(KEY, envelope(op, after={"id": 5, "ok": [1, None]}), POS)
    assert not plain.reread and plain.unavailable == ()


@pytest.mark.parametrize("key,value,reason", [
    (KEY, b"{not json", "not valid JSON"),
    (KEY, envelope("x", after={"id": 5}), "unknown op"),
    (None, envelope("c", after={"id": 5}), "without a record key"),
    (json.dumps({"id": None}).encode(), envelope("c", after={"id": None}), "key column is null"),
    (KEY, json.dumps({"op": "c", "after": {}}).encode(), "source block"),
])
def test_bad_records_are_record_errors(key, value, reason):
    with pytest.raises(RecordError, match=reason):
        decode(key, value, POS)


def test_composite_ids_are_stable_and_unambiguous():
    assert document_id({"a": 1, "b": "x|y"}) == "1|x%7Cy"
    assert document_id({"a": "1|x", "b": "y"}) != document_id({"a": "1", "b": "x|y"})


def test_streamed_change_beats_snapshot_even_below_its_lsn():
    snap = version_of({"lsn": 1000, "snapshot": "last", "sequence": '[null,"1000"]'})
    # The race: a transaction that began before the consistent point, first streamed after it.
    raced = version_of({"lsn": 900, "snapshot": "false", "sequence": '[null,"900"]'}, fence=1000)
    later = version_of({"lsn": 1200, "snapshot": "false", "sequence": '["1100","1200"]'})
    interleaved = version_of({"lsn": 950, "snapshot": "false", "sequence": '["1150","950"]'})
    assert snap < raced < later < interleaved


def test_decode_carries_fence():
    ch = decode(KEY, envelope("u", after={"id": 5}, lsn=900, seq=(None, 900)), POS, fence=1000)
    assert ch.version == Version(1000, 1, 900)


def _change(v: int, op: str, offset: int):
    raw = envelope("d" if op == "delete" else "u", after=None if op == "delete" else {"id": 5, "v": v},
                   before={"id": 5}, lsn=v, seq=(v, v))
    return decode(KEY, raw, Position("t", 0, offset))


@given(st.lists(st.sampled_from(["upsert", "delete"]), min_size=1, max_size=30), st.data())
def test_reduce_then_replay_converges_to_last_change(ops, data):
    changes = [_change(10 * (i + 1), op, i) for i, op in enumerate(ops)]
    cut = data.draw(st.integers(0, len(changes) - 1))
    shuffled = data.draw(st.permutations(changes + changes[cut:]))  # a replayed suffix, any order
    _, latest = last_per_key(shuffled)
    assert len(latest) == 1 and latest[0].version == changes[-1].version and latest[0].op == changes[-1].op


def test_reduce_merges_toast_from_older_change_in_batch():
    old = decode(KEY, envelope("u", after={"id": 5, "big": "B", "n": 1}, lsn=10, seq=(10, 10)), POS)
    new = decode(KEY, envelope("u", after={"id": 5, "big": "__debezium_unavailable_value", "n": 2},
                               lsn=20, seq=(20, 20)), POS)
    _, latest = last_per_key([new, old])
    assert latest[0].row == {"id": 5, "big": "B", "n": 2} and latest[0].unavailable == ()


def test_incremental_snapshot_read_uses_its_sequence():
    read = version_of({"lsn": None, "snapshot": "incremental", "sequence": '["5000","5000"]'})
    before = version_of({"lsn": 4900, "snapshot": "false", "sequence": '["4800","4900"]'})
    after = version_of({"lsn": 5100, "snapshot": "false", "sequence": '["5000","5100"]'})
    assert before < read < after


def test_snapshot_final_marker_counts_even_on_a_table_not_synced():
    from connectors.envelope import decode_records

    heartbeat = json.dumps({"op": "r", "after": {"id": 1}, "source": {
        "schema": "public", "table": "cdckit_heartbeat", "lsn": 900, "snapshot": "last",
        "sequence": '[null,"900"]'}}).encode()
    rows = [{"key": KEY, "value": envelope("r", after={"id": 5}, lsn=900, seq=(None, 900), snapshot="true"),
             "topic": "cdc.public.t", "partition": 0, "offset": 0},
            {"key": KEY, "value": heartbeat, "topic": "cdc.public.cdckit_heartbeat", "partition": 0, "offset": 0}]
    changes, dead, _, last = decode_records(rows, {}, {}, {"public.t"})
    assert [c.table for c in changes] == ["public.t"] and not dead and last == 900


def test_a_streamed_create_is_marked_created():
    placeholder = "__debezium_unavailable_value"
    created = decode(KEY, envelope("c", after={"id": 5, "big": placeholder}), POS)
    updated = decode(KEY, envelope("u", after={"id": 5, "big": placeholder}), POS)
    assert created.created and created.unavailable == ("big",) and not updated.created


def test_markers_are_looked_for_in_the_rows_not_in_the_source_block():
    from connectors.envelope import garbled_arrays, may_hold_placeholder, row_end

    # A snapshot's sequence starts "[null": in the source block it marks no array.
    raw = envelope("r", after={"id": 5, "tags": ["a"]}, seq=(None, 100), snapshot="true")
    after = json.loads(raw)["after"]
    assert b"[null" in raw and b"[null" not in raw[:row_end(raw)]
    assert garbled_arrays(raw, after, row_end(raw)) == ()
    # A map column holding a "source" key does not end the rows early.
    after = {"id": 5, "m": {"source": "x"}, "big": "__debezium_unavailable_value"}
    raw = envelope("u", after=after)
    assert may_hold_placeholder(raw, row_end(raw))
    assert decode(KEY, raw, POS).unavailable == ("big",)
    # Written in another order (source first), the whole record is searched.
    raw = json.dumps({"source": {"schema": "public", "table": "t", "lsn": 1, "snapshot": "false",
                                 "sequence": "[null,\"1\"]"}, "op": "u",
                      "after": {"id": 5, "big": "__debezium_unavailable_value"}}).encode()
    assert row_end(raw) == len(raw) and decode(KEY, raw, POS).unavailable == ("big",)


def test_custom_key_columns_follow_the_records_own_table():
    """The key columns of a table with `key:` set apply to its records, found by the topic's table
    for one decode; a record whose source block names another table takes that table's, one of a
    table not synced is skipped, and a record lacking a key column is a dead letter naming its
    table (a snapshot's last one still marks the snapshot's end)."""
    from connectors.envelope import decode_records

    keyed = {"public.t": ["id", "region"], "public.u": None}

    def on_t(offset, table="t", **kw):
        value = envelope(**{"op": "u", **kw}).replace(b'"table": "t"', f'"table": "{table}"'.encode())
        return {"key": KEY, "value": value, "topic": "cdc.public.t", "partition": 0, "offset": offset}

    rows = [on_t(0, after={"id": 5, "region": "eu", "n": 1}),
            on_t(1, "u", after={"id": 5, "n": 1}),        # written to t's topic, its source names u
            on_t(2, "other", after={"id": 5}),            # a table this config does not sync
            on_t(3, after={"id": 5, "n": 1}, op="r", snapshot="last", lsn=777)]
    changes, dead, _, last = decode_records(rows, {}, keyed, {"public.t", "public.u"})
    assert [(c.table, c.key, c.doc_id) for c in changes] == [
        ("public.t", {"id": 5, "region": "eu"}, "5|eu"), ("public.u", {"id": 5}, "5")]
    assert [(d.reason, d.extra) for d in dead] == [
        ("key column is null: {'id': 5, 'region': None}", {"table": "public.t"})]
    assert last == 777
