"""Typing changes' rows before the stores see them, and the column types it takes."""
import pytest

from derived.change import Change, Position, Version
from derived.sinks.store_errors import StoreUnavailable
from pipelines.apply.column_types import ColumnTypes
from pipelines.apply.typed_rows import columns_seen, type_rows

POS = Position("t", 0, 0)


def change(op="upsert", row=None, table="public.t"):
    return Change(table, op, {"id": 1}, "1", row, Version(1, 0, 0), POS)


def test_upserts_are_typed_deletes_left_alone():
    up, gone = change(row={"id": 1, "d": 1, "j": '{"a":1}', "n": "2.50"}), change("delete")
    other = change(row={"d": 1}, table="public.untyped")
    type_rows([up, gone, other], {"public.t": {"id": "integer", "d": "date", "j": "jsonb", "n": "numeric"}},
              {"public.t": frozenset({"n"})})
    assert up.row == {"id": 1, "d": "1970-01-02", "j": {"a": 1}, "n": 2.5}
    assert gone.row is None and other.row == {"d": 1}


def test_columns_seen_per_table():
    assert columns_seen([change(row={"a": 1}), change(row={"b": 2}), change("delete")]) == {"public.t": {"a", "b"}}


class Catalog:
    def __init__(self):
        self.types = {"public.t": {"id": "integer"}}
        self.reads = 0
        self.down = False

    def __call__(self, dsn, tables):
        self.reads += 1
        if self.down:
            raise OSError("connection refused")
        return {t: dict(self.types[t]) for t in tables}


def test_types_are_read_once_then_again_after_the_ttl_or_for_an_unknown_column():
    now = [0.0]
    catalog = Catalog()
    types = ColumnTypes({}, ttl_s=5, clock=lambda: now[0], read=catalog)
    assert types.of({"public.t": {"id"}}) == {"public.t": {"id": "integer"}}
    now[0] = 2
    types.of({"public.t": {"id"}})
    assert catalog.reads == 1
    catalog.types["public.t"]["d"] = "date"        # ALTER TABLE ADD COLUMN d date: read at once, never untyped
    assert types.of({"public.t": {"id", "d"}})["public.t"]["d"] == "date"
    assert catalog.reads == 2
    types.of({"public.t": {"id", "gone"}})          # an older record with a dropped column: looked for once
    types.of({"public.t": {"id", "gone"}})
    assert catalog.reads == 3
    catalog.types["public.t"]["d"] = "text"        # ALTER COLUMN TYPE: seen within the ttl
    now[0] = 7.5
    assert types.of({"public.t": {"id", "d"}})["public.t"]["d"] == "text"


def test_a_database_that_does_not_answer_keeps_the_types_read_before_and_never_renders_untyped():
    now = [0.0]
    catalog = Catalog()
    types = ColumnTypes({}, ttl_s=5, clock=lambda: now[0], read=catalog)
    types.of({"public.t": set()})
    catalog.down, now[0] = True, 10
    assert types.of({"public.t": set()}) == {"public.t": {"id": "integer"}}
    fresh = ColumnTypes({}, read=catalog)
    with pytest.raises(StoreUnavailable, match="column types of public.t not read"):
        fresh.of({"public.t": set()})
