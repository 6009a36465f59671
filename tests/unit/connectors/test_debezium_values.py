"""`verify`'s comparison is exact: what a store holds equals the database value or it is reported."""
import pytest

from connectors.debezium_values import same


@pytest.mark.parametrize("stored,expected,pg_type", [
    (9007199254741443, 9007199254741443, "bigint"),
    (0.30000000000000004, 0.30000000000000004, "double precision"),
    (3.0, 3.0, "double precision"),
    ("12.50", "12.5", "numeric(12,2)"),
    ('{"a":9007199254740993,"b":[1,2.5]}', '{"b": [1, 2.5], "a": 9007199254740993}', "jsonb"),
    ("2026-11-23T10:00:00.120Z", "2026-11-23T10:00:00.12Z", "timestamp with time zone"),
    ([1, 2], [1, 2], "integer[]"),
    (float("nan"), float("nan"), "double precision"),
    (None, None, "text"),
])
def test_equal_values(stored, expected, pg_type):
    assert same(stored, expected, pg_type)


@pytest.mark.parametrize("stored,expected,pg_type", [
    (9007199254741400.0, 9007199254741443, "bigint"),          # a bigint through a double: Lua's cjson
    (9007199254740992.0, 9007199254740993, "bigint"),          # 2^53 + 1 is no double
    (1795431054804788.0, 1795431054804789, "timestamp without time zone"),
    (0.30000000000000004, 0.3, "double precision"),             # no tolerance
    ({}, [], "jsonb"),                                          # cjson turns [] into {}
    ('{"a":9007199254740993}', '{"a":9007199254740992}', "jsonb"),
    ("12.51", "12.5", "numeric(12,2)"),
    ([1, 2], [1, 2, 3], "integer[]"),
    ("1", 1, "integer"),
    (True, 1, "boolean"),
    ("2026-11-23T10:00:00.121Z", "2026-11-23T10:00:00.12Z", "timestamp with time zone"),
])
def test_different_values(stored, expected, pg_type):
    assert not same(stored, expected, pg_type)


def test_human_output_cuts_long_values():
    from pipelines.cli.base import cut

    assert cut("short") == "'short'"
    long = cut("x" * 14_000)
    assert len(long) < 200 and "14,002 chars" in long and "sha256" in long
    assert cut("x" * 14_000) != cut("x" * 13_999 + "y")


def test_timestamps_and_times_of_precision_0_to_3_travel_in_milliseconds():
    """time.precision.mode=adaptive: Debezium's Timestamp/Time (ms) up to precision 3, MicroTimestamp/
    MicroTime (µs) above and without one; verify must expect what the connector sends."""
    import datetime as dt

    from connectors.debezium_values import render

    moment = dt.datetime(2024, 1, 1, 0, 0, 1, 123000)
    assert render(moment, "timestamp(3) without time zone") == 1_704_067_201_123
    assert render(moment, "timestamp(0) without time zone") == 1_704_067_201_123  # Postgres rounds it first
    assert render(moment, "timestamp(6) without time zone") == 1_704_067_201_123_000
    assert render(moment, "timestamp without time zone") == 1_704_067_201_123_000
    assert render([moment], "timestamp(3) without time zone[]") == [1_704_067_201_123]
    assert render(dt.time(0, 0, 1, 5000), "time(3) without time zone") == 1005
    assert render(dt.time(0, 0, 1, 5), "time without time zone") == 1_000_005


def test_hstore_and_json_texts_compare_by_value_not_key_order():
    """The hash format holds them as JSON text; Debezium's hstore key order is a hash map's."""
    assert same('{"bb":"x","a":"y"}', '{"a":"y","bb":"x"}', "hstore")
    assert not same('{"bb":"x","a":"z"}', '{"a":"y","bb":"x"}', "hstore")


def test_intervals_render_field_by_field_as_debezium_sends_them():
    from connectors.debezium_values import parse_interval, render

    assert render(parse_interval("12 days 24:00:00"), "interval") == "P0Y0M12DT24H0M0S"
    assert render(parse_interval("1 year 2 mons -3 days +04:05:06.5"), "interval") == "P1Y2M-3DT4H5M6.5S"
    assert render(parse_interval("-00:00:01"), "interval") == "P0Y0M0DT0H0M-1S"


# --- values psycopg cannot hold, read from Postgres's text -----------------------------------------
# Expected wire values: Debezium 3.7's own classes through Kafka's JsonConverter (a Java probe of
# PostgresValueConverter, JdbcValueConverters, DateTimeFormat and io.debezium.data.geometry).

@pytest.mark.parametrize("text,days", [
    ("2024-01-01", 19_723), ("0044-03-15 BC", -735_160), ("0001-12-31 BC", -719_163), ("0001-01-01", -719_162),
    ("4714-11-24 BC", -2_440_588), ("10000-01-01", 2_932_897), ("5874897-12-31", 2_145_042_905),
])
def test_dates_of_any_year(text, days):
    from connectors.debezium_values import date_days

    assert date_days(text) == days


def test_infinities_render_as_debezium_sends_them_per_type():
    from connectors.debezium_values import Infinite, date_days, render, timestamp_micros

    assert render(date_days("infinity"), "date") == 2_146_033_979
    assert render(date_days("-infinity"), "date") == -2_147_472_691
    assert render(timestamp_micros("infinity"), "timestamp without time zone") == (1 << 63) - 1
    assert render(timestamp_micros("-infinity"), "timestamp(6) without time zone") == -(1 << 63)
    assert render(Infinite(True), "timestamp(3) without time zone") == 9_223_372_036_825_200_000
    assert render(Infinite(False), "timestamp(0) without time zone") == -9_223_372_036_832_400_000
    assert render(Infinite(True), "timestamp with time zone") == "infinity"
    assert render([Infinite(False), None], "date[]") == [-2_147_472_691, None]


def test_timestamps_of_any_year_with_and_without_zone():
    from connectors.debezium_values import Micros, render, time_micros, timestamp_micros, zoned_text, zoned_time

    assert timestamp_micros("0044-03-15 10:00:00 BC") == -63_517_788_000_000_000   # Debezium's ms x 1000
    assert render(timestamp_micros("2024-01-01 10:00:00.5"), "timestamp(3) without time zone") == 1_704_103_200_500
    assert render(timestamp_micros("2024-01-01 10:00:00.5"), "timestamp without time zone") == 1_704_103_200_500_000
    assert timestamp_micros("2024-01-01 12:00:00+02") == timestamp_micros("2024-01-01 10:00:00")
    assert timestamp_micros("1900-01-01 00:00:00-00:09:21") == timestamp_micros("1900-01-01 00:09:21")
    assert zoned_text("0001-01-01 00:00:00+00 BC") == "0000-01-01T00:00:00Z"
    assert zoned_text("294276-12-31 23:59:59.999999+00") == "+294276-12-31T23:59:59.999999Z"
    assert zoned_text("2024-01-01 10:00:00.25+02") == "2024-01-01T08:00:00.250000Z"
    assert time_micros("24:00:00") == 86_400_000_000 and isinstance(time_micros("00:00:01"), Micros)
    assert render(time_micros("01:02:03.45"), "time(3) without time zone") == 3_723_450
    assert [zoned_time(t) for t in ("24:00:00+00", "10:00:00+02", "01:00:00.250+02", "23:30:00-01:30")] == [
        "24:00:00Z", "08:00:00Z", "23:00:00.25Z", "01:00:00Z"]


def test_floats_money_and_bits():
    from connectors.debezium_values import BitText, money_decimal, render

    assert [render(v, "double precision") for v in (float("nan"), float("inf"), float("-inf"), 1.5)] == [
        "NaN", "Infinity", "-Infinity", 1.5]
    assert [str(money_decimal(t)) for t in ("$1,234.56", "-$1,234.56", "($1,234.56)", "$0.00")] == [
        "1234.56", "-1234.56", "-1234.56", "0.00"]
    assert render(money_decimal("-$92,233,720,368,547,758.08"), "money") == "-92233720368547758.08"
    bits = {"101": "BQ==", "1111111111": "/wM=", "10000000": "gA==", "0000000001": "AQ==", "00000000": ""}
    assert {t: render(BitText(t), f"bit({len(t)})") for t in bits} == bits
    assert render(BitText("101"), "bit varying") == "BQ=="
    assert render(BitText("1"), "bit(1)") is True and render(BitText("0"), "bit varying(1)") is False


def test_geometric_values_are_debeziums_structs():
    from connectors.debezium_values import render

    assert render("(1,2)", "point") == {"x": 1.0, "y": 2.0, "wkb": "AQEAAAAAAAAAAADwPwAAAAAAAABA", "srid": None}
    assert render("(NaN,Infinity)", "point") == {"x": "NaN", "y": "Infinity", "wkb": "AQEAAAAAAAAAAAD4fwAAAAAAAPB/",
                                                  "srid": None}
    assert render("<(1,2),3>", "circle") == {"center": render("(1,2)", "point"), "radius": 3.0}
    assert render("{1,-1,0}", "line") == {"a": 1.0, "b": -1.0, "c": 0.0}
    assert render("[(0,0),(1,2)]", "path") == {"wkb": "AQIAAAACAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAPA/AAAAAAAAAEA=",
                                               "srid": None, "extensions": {"type": "path", "closed": "false"}}
    ring = render("((0,0),(1,0),(0,1))", "polygon")
    assert ring == render("((0,0),(1,0),(0,1),(0,0))", "polygon") and ring["extensions"] == {"type": "polygon"}
    assert render(["(1,2)", None], "point[]") == [render("(1,2)", "point"), None]


@pytest.mark.parametrize("args,sent", [
    (("int4", "b"), True), (("mood", "e"), True), (("comp", "c"), False), (("pg_lsn", "b"), False),
    (("int4multirange", "m"), False), (("tsquery", "b"), False), (("citext", "b"), True),
    (("_int4", "b", "int4", "b"), True), (("_money", "b", "money", "b"), False),
    (("_interval", "b", "interval", "b"), False), (("_posint", "b", "posint", "d"), False),
    (("_mood", "b", "mood", "e"), True), (("_comp", "b", "comp", "c"), False),
])
def test_the_types_debezium_leaves_out(args, sent):
    from connectors.debezium_values import debezium_sends

    assert debezium_sends(*args) is sent


def test_same_compares_float32_as_float32_and_instants_of_any_year():
    assert same(0.1, 0.10000000149011612, "real") and not same(0.1, 0.2, "real") and same([0.1], [0.1], "real[]")
    assert same("-0043-03-15T10:00:00.000000Z", "-0043-03-15T10:00:00Z", "timestamp with time zone")
    assert same("+10000-01-01T02:00:00+02:00", "+10000-01-01T00:00:00Z", "timestamp with time zone")
    assert not same("+10000-01-01T00:00:00.000001Z", "+10000-01-01T00:00:00Z", "timestamp with time zone")
    assert same("infinity", "infinity", "timestamp with time zone") and same("NaN", "NaN", "double precision")


def test_an_unreadable_value_equals_nothing():
    from connectors.debezium_values import Unreadable, render

    bad = Unreadable("unreadable '24:00:00+02': DataError")
    assert render(bad, "time with time zone") is bad
    assert not same(str(bad), bad, "text") and not same(bad, bad, "text") and bad != str(bad)
