"""Tombstones against a batch's latest changes: their offset orders them, they carry no version."""
from derived.change import UNKNOWN, Change, Position, Version
from derived.reduce import last_per_key, settle_tombstones


def ch(offset, op="upsert", lsn=None, doc="1"):
    v = Version(lsn or offset * 10, 1, lsn or offset * 10)
    return Change("public.t", op, {"id": doc}, doc, None if op == "delete" else {"id": doc}, v,
                  Position("cdc.public.t", 0, offset))


def tomb(offset, doc="1"):
    return Change("public.t", "delete", {"id": doc}, doc, None, UNKNOWN, Position("cdc.public.t", 0, offset),
                  tombstone=True)


def settled(changes, tombstones):
    _, latest = last_per_key(changes)
    deletes_at = {(c.position.topic, c.position.partition, c.position.offset) for c in changes if c.op == "delete"}
    return {c.doc_id: c for c in settle_tombstones(latest, tombstones, deletes_at)}


def test_alone_in_its_batch_it_deletes_whatever_is_held():
    got = settled([], [tomb(5)])["1"]
    assert got.tombstone and got.version == UNKNOWN and got.op == "delete"


def test_right_after_its_own_delete_it_adds_nothing():
    got = settled([ch(3), ch(4, "delete")], [tomb(5)])["1"]
    assert not got.tombstone and got.op == "delete"


def test_a_newer_change_after_it_wins():
    got = settled([ch(6)], [tomb(5)])["1"]
    assert got.op == "upsert" and got.position.offset == 6


def test_after_an_upsert_whose_delete_is_gone_it_deletes():
    got = settled([ch(3, lsn=77)], [tomb(5)])["1"]
    assert got.tombstone and got.version == UNKNOWN


def test_a_redelivered_tombstone_after_a_newer_change_of_its_batch_is_its_deletes_own():
    # Connect resent its delete (offset 4) and tombstone (5) after the newer insert (3) was written.
    got = settled([ch(3, lsn=1040), ch(4, "delete", lsn=1030)], [tomb(5)])["1"]
    assert got.op == "upsert" and got.version == Version(1040, 1, 1040)


def test_other_keys_are_untouched():
    got = settled([ch(3, doc="2")], [tomb(5, doc="1")])
    assert got["2"].op == "upsert" and got["1"].tombstone


def test_an_update_after_a_create_in_one_batch_stays_created():
    # A primary-key change's create and an update of the new key: nothing older holds the key.
    create = ch(1)
    create.created, create.unavailable = True, ("big",)
    update = ch(2)
    update.unavailable = ("big",)
    _, latest = last_per_key([create, update])
    assert latest[0] is update and update.created and update.unavailable == ("big",)


def test_a_column_debezium_could_not_render_is_not_taken_from_an_older_change():
    """A TOAST placeholder is filled from the key's older change in the batch; an array Debezium
    could not render (`reread`) changed, so it stays unavailable and is read from Postgres."""
    older = ch(1, lsn=10)
    older.row = {"id": 1, "tags": ["a"], "body": "long"}
    toast = ch(2, lsn=11)
    toast.row, toast.unavailable = {"id": 1, "tags": ["b"]}, ("body",)
    garbled = ch(3, lsn=12)
    garbled.row, garbled.unavailable, garbled.reread = {"id": 1, "body": "x"}, ("tags",), True
    _, [kept] = last_per_key([older, toast])
    assert kept.row == {"id": 1, "tags": ["b"], "body": "long"} and kept.unavailable == ()
    _, [latest] = last_per_key([older, garbled])
    assert latest.unavailable == ("tags",) and "tags" not in latest.row and latest.reread
