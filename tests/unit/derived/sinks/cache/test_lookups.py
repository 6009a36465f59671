"""A row's lookup entries (derived/sinks/cache/lookups.py): keys and members from its columns,
sorted sets' scores from numbers, dates, times and booleans; nulls in no set."""
import math

import pytest

from derived.sinks.cache.lookups import Lookup, LookupValueError, entries, redis_double, score_of

BY_CUSTOMER = Lookup("orders_by_customer:{customer_id}")
NEWEST = Lookup("recent:{customer_id}:{region}", member="{id}", score="placed_at")


def test_entries_key_the_row_by_its_columns_and_hold_its_id():
    row = {"id": 7, "customer_id": 42, "region": "eu", "placed_at": "2026-01-02T03:04:05.5"}
    assert entries((BY_CUSTOMER, NEWEST), row, "7") == [
        ["orders_by_customer:42", "7", ""], ["recent:42:eu", "7", repr(1767323045.5)]]
    assert BY_CUSTOMER.columns == {"customer_id"} and NEWEST.columns == {"customer_id", "region", "id", "placed_at"}


def test_a_null_key_or_score_is_in_no_set():
    assert entries((BY_CUSTOMER,), {"id": 1, "customer_id": None}, "1") == []
    assert entries((NEWEST,), {"id": 1, "customer_id": 4, "region": "eu", "placed_at": None}, "1") == []
    assert entries((Lookup("x:{c}", score="s"),), {"c": 1, "s": "NaN"}, "1") == []


def test_composite_keys_never_slide_across_a_separator():
    a = entries((Lookup("k:{a}:{b}"),), {"a": "x:y", "b": "z"}, "1")[0][0]
    b = entries((Lookup("k:{a}:{b}"),), {"a": "x", "b": "y:z"}, "1")[0][0]
    assert a != b


@pytest.mark.parametrize("value,score", [
    (5, 5.0), (-2.5, -2.5), (True, 1.0), (False, 0.0), ("12.50", 12.5), ("-0.001", -0.001),
    ("1970-01-02", 86_400.0), ("1969-12-31T23:59:59", -1.0), ("2026-01-01T00:00:00Z", 1767225600.0),
    ("2026-01-01T02:00:00+02:00", 1767225600.0), ("0044-03-15", -60_772_291_200.0),
    ("-0043-03-15", -63_517_824_000.0), ("+10000-01-01", 253_402_300_800.0),
    ("01:00:00.25", 3600.25), ("01:00:00Z", 3600.0),
    ("infinity", math.inf), ("-infinity", -math.inf), ("Infinity", math.inf), (math.inf, math.inf),
    ("POSITIVE_INFINITY", math.inf), ("NEGATIVE_INFINITY", -math.inf),   # Debezium's numeric infinities
    (10 ** 400, math.inf), ("1e400", math.inf)])
def test_scores(value, score):
    assert score_of(value) == score


def test_scores_reach_redis_as_the_same_double():
    for s in (0.1, 1e300, -1767225600.123456, math.inf, -math.inf):
        assert float(redis_double(s)) == s
    assert redis_double(math.inf) == "+inf"


@pytest.mark.parametrize("value", ["abc", {"a": 1}, [1], "2026-13-45x"])
def test_a_score_that_is_no_number_names_its_column(value):
    with pytest.raises(LookupValueError, match="score column amount"):
        entries((Lookup("x:{c}", score="amount"),), {"c": 1, "amount": value}, "1")
