"""The replay fold over the shapes a compacted change log can take (pure: no Spark, no Kafka)."""
from hypothesis import assume, given, settings, strategies as st

from derived.reduce import last_per_key
from pipelines.apply.rebuild_fold import fold
from tests.support.records import TOPIC, key, rec, value

KEYS = {"public.items": None}
TOPICS = {TOPIC: "public.items"}


def survivors(records, chunk=20_000):
    f = fold(records, KEYS, TOPICS, chunk)
    return {c.doc_id: c.row["name"] for c in f.survivors()}, f


def test_last_upsert_per_key_survives_and_deletes_drop_keys():
    got, f = survivors([rec(0, key(1), value("c", 1, 100, "a", 90)), rec(1, key(1), value("u", 1, 120, "b", 110)),
                        rec(2, key(2), value("c", 2, 130, "x", 125)), rec(3, key(2), value("d", 2, 140, None, 135)),
                        rec(4, key(2), None)])
    assert got == {"1": "b"}
    assert f.records == 5 and f.tombstones == 1


def test_key_with_only_its_tombstone_left():
    got, _ = survivors([rec(7, key(1), None), rec(9, key(2), value("c", 2, 200, "y", 190))])
    assert got == {"2": "y"}


def test_delete_compacted_away_tombstone_remains_hides_older_upsert():
    # op=d gone, its tombstone kept: the upsert below it must not come back.
    got, _ = survivors([rec(0, key(1), value("c", 1, 100, "a", 90)), rec(5, key(1), None),
                        rec(6, key(3), value("c", 3, 300, "z", 290))])
    assert got == {"3": "z"}


def test_reinsert_after_tombstone_survives():
    got, _ = survivors([rec(0, key(1), value("c", 1, 100, "a", 90)), rec(1, key(1), value("d", 1, 110, None, 105)),
                        rec(2, key(1), None), rec(3, key(1), value("c", 1, 150, "again", 140))])
    assert got == {"1": "again"}


def test_key_gone_entirely_and_offset_gaps():
    got, f = survivors([rec(3, key(2), value("u", 2, 400, "two", 390)), rec(40, key(4), value("u", 4, 500, "four", 490)),
                        rec(41, key(2), value("u", 2, 600, "two'", 590))])
    assert got == {"2": "two'", "4": "four"}
    assert f.records == 3


def test_truncate_drops_older_keys_only():
    got, _ = survivors([rec(0, key(1), value("c", 1, 100, "a", 90)), rec(1, None, value("t", 0, 200, None, 190)),
                        rec(2, key(2), value("c", 2, 300, "b", 290))])
    assert got == {"2": "b"}


def test_snapshot_fence_carries_through_the_fold():
    # The hand-off race: a change streamed after the snapshot with an LSN below the snapshot's and
    # no previous-commit position still beats the snapshot read (the fence), like in the live sync.
    got, f = survivors([rec(0, key(1), value("r", 1, 1000, "read", None, snapshot="last")),
                        rec(1, key(1), value("u", 1, 900, "streamed", None))])
    assert got == {"1": "streamed"}
    assert f.fences == {f"{TOPIC}:0": 1000}


def test_older_version_at_higher_offset_loses():
    got, _ = survivors([rec(0, key(1), value("u", 1, 900, "newer", 850)),
                        rec(1, key(1), value("u", 1, 800, "older", 700))])
    assert got == {"1": "newer"}


def test_tombstone_cut_spans_chunks():
    records = [rec(0, key(1), value("c", 1, 100, "a", 90)), rec(1, key(2), value("c", 2, 101, "b", 91)),
               rec(2, key(1), None)]
    assert survivors(records, chunk=1)[0] == survivors(records)[0] == {"2": "b"}


def test_malformed_records_are_dead_letters_not_failures():
    got, f = survivors([rec(0, key(1), b"{not json"), rec(1, key(2), value("c", 2, 100, "ok", 90))])
    assert got == {"2": "ok"} and len(f.dead) == 1 and "not valid JSON" in f.dead[0].reason


OPS = st.sampled_from(["c", "u", "d", "toast", "r", "t", "schemaful"])


def _record(offset, k, op, lsn):
    """A record of `op`; 'toast' is an update whose name is an unchanged TOAST column, 'schemaful'
    an update wrapped with schemas (another key encoding of the same row)."""
    import json

    if op == "toast":
        v = json.loads(value("u", k, lsn, "x", lsn - 5))
        v["after"]["name"] = "__debezium_unavailable_value"
        return rec(offset, key(k), json.dumps(v).encode())
    if op == "schemaful":
        v = json.loads(value("u", k, lsn, f"v{lsn}", lsn - 5))
        return rec(offset, json.dumps({"schema": {}, "payload": {"id": k}}).encode(),
                   json.dumps({"schema": {}, "payload": v}).encode())
    if op == "r":
        return rec(offset, key(k), value("r", k, lsn, f"v{lsn}", None, snapshot="true"))
    if op == "t":
        return rec(offset, None, value("t", 0, lsn, None, lsn - 5))
    return rec(offset, key(k), value(op, k, lsn, f"v{lsn}", lsn - 5))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), OPS), min_size=1, max_size=40), st.integers(1, 7))
def test_fold_in_any_chunking_equals_reducing_the_whole_log(ops, chunk):
    from connectors.envelope import Tombstone, decode
    from derived.change import Position

    # An unchanged-TOAST update of a row a truncate removed cannot happen (the row would be re-inserted first).
    assume(not ({"t", "toast"} <= {op for _, op in ops}))
    records, offset, lsn = [], 0, 100
    for k, op in ops:
        lsn += 10
        records.append(_record(offset, k, op, lsn))
        offset += 1
        if op == "d":
            records.append(rec(offset, key(k), None))
            offset += 1
    fences = {}
    decoded = []
    for r in records:
        d = decode(r["key"], r["value"], Position(TOPIC, 0, r["offset"]), fences.get("f", 0))
        if not isinstance(d, Tombstone):
            if d.snapshot:
                fences["f"] = max(fences.get("f", 0), d.version.lsn)
            decoded.append(d)
    truncates, latest = last_per_key(decoded)
    cut = max((t.version for t in truncates), default=None)
    expected = {c.doc_id: (c.row.get("name"), c.unavailable) for c in latest
                if c.op == "upsert" and (cut is None or c.version >= cut)}
    f = fold(records, KEYS, TOPICS, chunk)
    assert {c.doc_id: (c.row.get("name"), c.unavailable) for c in f.survivors()} == expected


def test_a_fold_starts_from_cuts_read_in_another_partition():
    # The marker of a truncate is in the marker topic; this partition holds only rows. The rebuild
    # reads the cut first: rows older than it are gone, newer ones stay.
    from derived.change import Version
    from tests.support.records import MARKERS

    f = fold([rec(0, key(1), value("c", 1, 100, "old", 90)), rec(1, key(2), value("c", 2, 300, "new", 290))],
             KEYS, TOPICS)
    assert {c.doc_id for c in f.survivors()} == {"1", "2"}
    from pipelines.apply.rebuild_fold import PartitionFold

    f = PartitionFold(KEYS, TOPICS, truncated={"public.items": Version(200, 1, 210)}, truncate_table=MARKERS)
    f.add([rec(0, key(1), value("c", 1, 100, "old", 90)), rec(1, key(2), value("c", 2, 300, "new", 290))])
    assert {c.doc_id: c.row["name"] for c in f.survivors()} == {"2": "new"}


def test_a_marker_in_the_folded_partition_is_a_truncate_too():
    from pipelines.apply.rebuild_fold import PartitionFold
    from tests.support.records import MARKERS, truncate_marker

    f = PartitionFold(KEYS, TOPICS, truncate_table=MARKERS)
    f.add([rec(0, key(1), value("c", 1, 100, "old", 90)), rec(1, *truncate_marker(210, 200)),
           rec(2, key(2), value("c", 2, 300, "new", 290))])
    assert {c.doc_id for c in f.survivors()} == {"2"}
