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
    from pipelines.cli.render import cut

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
