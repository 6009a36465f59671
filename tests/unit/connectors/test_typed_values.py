"""Debezium's wire values to document values, per Postgres type."""
import datetime as dt

import pytest
from hypothesis import given, strategies as st

from connectors.debezium_values import render
from connectors.typed_values import DATE_MAX_DAYS, DATE_MIN_DAYS, converter, row_converter


@pytest.mark.parametrize("pg_type,wire,doc", [
    ("date", 19723, "2024-01-01"),
    ("date", -1, "1969-12-31"),
    ("date", 2_932_897, "+10000-01-01"),           # beyond Python's years: expanded ISO year
    ("date", -719_529, "-0001-12-31"),             # 2 BC in astronomical numbering
    ("timestamp without time zone", 1_700_000_000_123_456, "2023-11-14T22:13:20.123456"),
    ("timestamp without time zone", 1_700_000_000_000_000, "2023-11-14T22:13:20"),
    ("timestamp(3) without time zone", 1_700_000_000_120, "2023-11-14T22:13:20.120"),
    ("timestamp(0) without time zone", -1000, "1969-12-31T23:59:59"),
    ("timestamp(6) without time zone", -1, "1969-12-31T23:59:59.999999"),
    ("time without time zone", 3_723_000_004, "01:02:03.000004"),
    ("time without time zone", 86_400_000_000, "24:00:00"),
    ("time(3) without time zone", 3_723_450, "01:02:03.450"),
    ("jsonb", '{"a": [1, 2.5, null], "b": {"c": "d"}}', {"a": [1, 2.5, None], "b": {"c": "d"}}),
    ("json", '"just text"', "just text"),
    ("json", "[]", []),
    ("jsonb", '{"big": 123456789012345678901234}', {"big": 1.2345678901234568e23}),
    ("jsonb", '{"huge": 1e400}', '{"huge": 1e400}'),   # beyond a double: the JSON text
    ("hstore", '{"k":"v"}', {"k": "v"}),
    ("date[]", [0, 1], ["1970-01-01", "1970-01-02"]),
    ("jsonb[]", ['{"a":1}', "2"], [{"a": 1}, 2]),
    ("timestamp(3) without time zone[]", [0], ["1970-01-01T00:00:00"]),
])
def test_typed(pg_type, wire, doc):
    assert converter(pg_type)(wire) == doc


@pytest.mark.parametrize("pg_type", ["integer", "bigint", "text", "uuid", "bytea", "boolean", "numeric(12,2)",
                                     "timestamp with time zone", "time with time zone", "interval", "integer[]",
                                     "character varying(20)", "money", "inet", "double precision"])
def test_types_debezium_already_renders_well_pass_through(pg_type):
    assert converter(pg_type) is None


@pytest.mark.parametrize("wire,doc", [("12.30", 12.3), ("-7", -7), ("0", 0), ("99999999999999999999999", 1e23),
                                      ("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity")])
def test_numeric_as_number(wire, doc):
    assert converter("numeric(30,2)", as_number=True)(wire) == doc
    assert converter("numeric(30,2)[]", as_number=True)([wire]) == [doc]


@pytest.mark.parametrize("pg_type,wire", [
    ("date", "2024-01-01"),            # an old-shape record around a type change: left as it came
    ("timestamp without time zone", "text"),
    ("jsonb", {"already": "an object"}),
    ("jsonb", "not json {"),           # Debezium never sends this; held as the text
    ("numeric", 12),
    ("date", True),
])
def test_values_of_another_shape_are_left_as_they_came(pg_type, wire):
    assert converter(pg_type, as_number=True)(wire) == wire


def test_row_converter_types_only_what_needs_it():
    convert = row_converter({"id": "bigint", "d": "date", "j": "jsonb", "n": "numeric(5,1)", "m": "numeric"},
                            numbers={"n"})
    row = {"id": 1, "d": 0, "j": '{"x":1}', "n": "1.5", "m": "2.5", "extra": "kept", "nothing": None}
    assert convert(row) == {"id": 1, "d": "1970-01-01", "j": {"x": 1}, "n": 1.5, "m": "2.5", "extra": "kept",
                            "nothing": None}
    assert row["d"] == 0  # a new dict: the change's row is not edited under anyone
    assert row_converter({"id": "integer", "t": "text"})(row) == row


@given(st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31, 23, 59, 59, 999999)))
def test_timestamps_read_back_as_the_database_value(value):
    """Typed(render(v)) is v's ISO text: the round trip through Debezium's integers loses nothing."""
    typed = converter("timestamp without time zone")(render(value, "timestamp without time zone"))
    assert dt.datetime.fromisoformat(typed) == value
    millis = value.replace(microsecond=value.microsecond // 1000 * 1000)
    typed = converter("timestamp(3) without time zone")(render(millis, "timestamp(3) without time zone"))
    assert dt.datetime.fromisoformat(typed) == millis


@given(st.dates())
def test_dates_read_back_as_the_database_value(value):
    assert converter("date")(render(value, "date")) == value.isoformat()


@given(st.integers(min_value=DATE_MIN_DAYS, max_value=DATE_MAX_DAYS - 1))
def test_dates_beyond_pythons_years_count_days_like_the_calendar(days):
    """The expanded-year path agrees with Python's calendar where both exist, and is monotonic over
    Postgres's dates (4714 BC to 5874897 AD: beyond them, Debezium's infinities)."""
    text = converter("date")(days)
    year = int(text[:-6])
    if 1 <= year <= 9999:
        assert text == (dt.date(1970, 1, 1) + dt.timedelta(days=days)).isoformat()
    nxt = converter("date")(days + 1)
    assert (int(nxt[:-6]), nxt[-5:]) > (year, text[-5:])


@given(st.times())
def test_times_read_back(value):
    typed = converter("time without time zone")(render(value, "time without time zone"))
    assert dt.time.fromisoformat(typed) == value.replace(tzinfo=None)


# What Debezium 3.7 sends for infinities (its own classes through Kafka's JsonConverter, see
# connectors/typed_values.py): streaming and snapshot day numbers for dates, ms and µs for timestamps.
@pytest.mark.parametrize("pg_type,wire,doc", [
    ("date", 2_146_033_979, "infinity"), ("date", -2_147_472_691, "-infinity"),
    ("date", -622_191_234, "infinity"), ("date", -622_191_233, "infinity"), ("date", -625_821_272, "-infinity"),
    ("date", 2_145_042_905, "+5874897-12-31"), ("date", -2_440_588, "-4713-11-24"),   # Postgres's last and first
    ("date", -735_160, "-0043-03-15"),                                                 # 44 BC
    ("timestamp(3) without time zone", 9_223_372_036_825_200_000, "infinity"),
    ("timestamp(3) without time zone", -9_223_372_036_832_400_000, "-infinity"),
    ("timestamp(3) without time zone", 9_224_318_015_999_999, "+294276-12-31T23:59:59.999"),
    ("timestamp without time zone", (1 << 63) - 1, "infinity"),
    ("timestamp without time zone", -(1 << 63), "-infinity"),
    ("timestamp without time zone", -210_866_803_200_000_000, "-4713-11-24T00:00:00"),
    ("timestamp without time zone[]", [(1 << 63) - 1, None, 0], ["infinity", None, "1970-01-01T00:00:00"]),
])
def test_infinite_and_far_dates_and_timestamps(pg_type, wire, doc):
    assert converter(pg_type)(wire) == doc


def _deep(n: int) -> str:
    return '{"a": ' * n + "1" + "}" * n


@pytest.mark.parametrize("text,kept_as_value", [
    (_deep(100), True), (_deep(101), False), ("[" * 100 + "]" * 100, True), ("[" * 101 + "]" * 101, False),
    ("[" * 2000 + "]" * 2000, False),                             # beyond orjson's reader too
    ('{"s": "%s"}' % ("x" * 31_990), True), ('{"s": "%s"}' % ("x" * 32_000), False),
    ('{"s": "%s"}' % ("é" * 15_995), True), ('{"s": "%s"}' % ("é" * 16_000), False),  # bytes, not characters
    ('{"%s": 1}' % ("k" * 32_000), False),                        # a key is part of the path
    (str({f"k{i}": {"x": "y" * 5_000} for i in range(20)}).replace("'", '"'), True),   # long text, short leaves
    ('{"a": {"b": {"c": "%s"}}}' % ("x" * 31_994), True),         # the path counts: "a.b.c=" + value
    ('{"a": {"b": {"c": "%s"}}}' % ("x" * 31_995), False),
    ('"%s"' % ("x" * 40_000), True),                              # a scalar: the whole value is its own leaf
    ('[1, "two", null, [3, [4]], {"": {"a.b": 5}}]', True),
])
def test_json_no_index_could_take_is_held_as_its_text(text, kept_as_value):
    import json

    got = converter("jsonb")(text)
    assert got == (json.loads(text) if kept_as_value else text)
