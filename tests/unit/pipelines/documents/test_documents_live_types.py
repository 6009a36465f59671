"""The documents' fold renders by the catalog's types as they are now (issue #38.3): a type change
read by the worker's ColumnTypes changes the converter; a column nobody looked for is read at once."""
from pipelines.apply.column_types import ColumnTypes
from pipelines.documents.documents_query import LiveTypes

T = "public.lines"


class Clock:
    t = 0.0

    def __call__(self):
        return self.t


def test_a_retyped_column_is_rendered_by_its_new_type_after_the_ttl():
    catalog = {T: {"id": "integer", "at": "timestamp(3) without time zone"}}
    clock = Clock()
    types = ColumnTypes({}, ttl_s=5, clock=clock, read=lambda dsn, tables: {t: dict(catalog[t]) for t in tables})
    live = LiveTypes(types, {}, {T})
    convert = live.get(T)
    assert convert({"id": 1, "at": 1_700_000_000_123}) == {"id": 1, "at": "2023-11-14T22:13:20.123"}
    catalog[T]["at"] = "timestamp(6) without time zone"   # ALTER ... TYPE timestamp(6)
    clock.t = 6
    assert convert({"id": 1, "at": 1_700_000_000_123_456}) == {"id": 1, "at": "2023-11-14T22:13:20.123456"}
    assert live.get("public.other") is None


def test_a_column_added_later_is_typed_at_once():
    catalog = {T: {"id": "integer"}}
    types = ColumnTypes({}, ttl_s=60, clock=Clock(), read=lambda dsn, tables: {t: dict(catalog[t]) for t in tables})
    convert = LiveTypes(types, {}, {T}).get(T)
    assert convert({"id": 1}) == {"id": 1}
    catalog[T]["day"] = "date"                            # ADD COLUMN day date, then a write
    assert convert({"id": 1, "day": 19000}) == {"id": 1, "day": "2022-01-08"}
