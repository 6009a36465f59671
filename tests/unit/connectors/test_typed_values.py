"""Debezium's wire values to document values, per Postgres type."""
import datetime as dt

import pytest
from hypothesis import given, strategies as st

from connectors.debezium_values import render
from connectors.typed_values import converter, row_converter


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
    ("jsonb", "not json {"),           # Debezium never sends this; the engine refuses it -> dead letter
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


@given(st.integers(min_value=-(10 ** 9), max_value=10 ** 9))
def test_dates_beyond_pythons_years_count_days_like_the_calendar(days):
    """The expanded-year path agrees with Python's calendar where both exist, and is monotonic."""
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
