"""Row filters (connectors/row_filter.py): the language, its types, SQL's three-valued logic, and the
mistakes refused naming the column. tests/integration/test_row_filters.py holds the same
predicates against Postgres's own WHERE."""
import math

import pytest

from connectors.row_filter import FilterError, compile_filter, parse_filter, predicate_columns, store_predicate

TYPES = {"id": "integer", "status": "text", "amount": "numeric(12,2)", "score": "double precision",
         "paid": "boolean", "day": "date", "at": "timestamp(3) without time zone",
         "at6": "timestamp without time zone", "tz": "timestamp with time zone", "kind": "order_kind",
         "meta": "jsonb", "tags": "text[]", "Mixed": "text"}


def keep(text, **row):
    return compile_filter(text, TYPES)(row)


def test_comparisons_by_the_columns_types():
    assert keep("amount >= 10.5", amount="10.50") and not keep("amount > 10.5", amount="10.50")
    assert keep("amount > 99999999999999999999", amount="100000000000000000000.01")   # exact, no double
    assert keep("score < 1e-3", score=0.0001) and not keep("score < 1", score="NaN")
    assert keep("day < '2000-01-01'", day=-1) and keep("day >= '1970-01-02'", day=1)
    assert keep("day < '0001-01-01'", day=-800_000)          # a BC date, as days
    assert keep("day > '9999-12-31'", day=2_146_033_979)      # 'infinity' as Debezium streams it
    assert keep("at = '1970-01-01 00:00:01'", at=1000) and keep("at6 = '1970-01-01 00:00:01'", at6=1_000_000)
    assert keep("tz > '2024-01-01 01:00:00+02'", tz="2024-01-01T00:00:00.5Z")
    assert not keep("tz > '2024-01-01 01:00:00+00'", tz="2024-01-01T00:00:00.5Z")
    assert keep("kind in ('a', 'b')", kind="b") and keep("status starts with 'ab'", status="abc")
    assert keep("paid", paid=True) and keep("not paid", paid=False) and keep('"Mixed" = \'x\'', Mixed="x")


def test_null_makes_a_comparison_unknown_as_in_a_where_clause():
    assert not keep("status = 'a'", status=None) and not keep("not status = 'a'", status=None)
    assert not keep("status != 'a'", status=None)
    assert keep("status = 'a' or id = 1", status=None, id=1)
    assert not keep("status = 'a' and id = 1", status=None, id=1)
    assert keep("status is null", status=None) and keep("status is not null", status="")
    assert keep("paid is not true", paid=None) and not keep("paid is false", paid=None)
    assert not keep("status not in ('a')", status=None)
    assert keep("meta is not null and tags is null", meta={"a": 1}, tags=None)


def test_a_missing_column_reads_as_null():
    assert keep("status is null") and not keep("id > 0")


@pytest.mark.parametrize("text, column, words", [
    ("nope = 1", "nope", "no column"),
    ("Mixed = 'x'", "mixed", 'did you mean "Mixed"'),
    ("amount > 'x'", "amount", "numeric"),
    ("paid = 1", "paid", "true or false"),
    ("status > 3", "status", "'string'"),
    ("at > '2024-01-01 10:00:00+02'", "at", "without a zone"),
    ("day < '2024-13-01'", "day", "YYYY-MM-DD"),
    ("meta = 'x'", "meta", "is null"),
    ("tags is true", "tags", "not boolean"),
    ("kind > 'a'", "kind", "no order"),
    ("amount starts with '1'", "amount", "applies to text"),
    ("id", "id", "not boolean"),
])
def test_mistakes_are_refused_naming_the_column(text, column, words):
    with pytest.raises(FilterError) as exc:
        compile_filter(text, TYPES)
    assert exc.value.column == column and words in str(exc.value), str(exc.value)


@pytest.mark.parametrize("text, words", [
    ("", "empty"), ("status = null", "is null"), ("status = 'a' and", "column name"), ("(id = 1", "')'"),
    ("id = 1 id = 2", "after a complete"), ("id ~ 1", "cannot read"), ("status not like 'a'", "'in'"),
])
def test_syntax_mistakes_say_what_was_expected(text, words):
    with pytest.raises(FilterError) as exc:
        parse_filter(text)
    assert words in str(exc.value), str(exc.value)


def test_soft_delete_by_boolean_by_timestamp_and_by_value():
    by_flag = store_predicate(None, ("paid", None), TYPES)      # a boolean marks by true
    assert by_flag({"paid": False}) and by_flag({"paid": None}) and not by_flag({"paid": True})
    by_time = store_predicate(None, ("tz", None), TYPES)        # any value marks (deleted_at)
    assert by_time({"tz": None}) and not by_time({"tz": "2024-01-01T00:00:00Z"})
    by_value = store_predicate(None, ("status", "deleted"), TYPES)
    assert by_value({"status": "live"}) and by_value({"status": None}) and not by_value({"status": "deleted"})
    both = store_predicate("amount > 0", ("status", "deleted"), TYPES)
    assert both({"amount": "1", "status": "x"}) and not both({"amount": "1", "status": "deleted"})
    assert store_predicate(None, None, TYPES) is None
    assert predicate_columns("amount > 0 or not paid", ("status", "deleted")) == {"amount", "paid", "status"}
    with pytest.raises(FilterError):
        store_predicate(None, ("amount", "many"), TYPES)


def test_infinite_timestamps_compare_beyond_every_instant():
    assert keep("tz > '294276-01-01 00:00:00+00'", tz="infinity")
    assert keep("at6 < '0001-01-01 00:00:00'", at6=-(1 << 63)) and not math.isnan(0.0)


WIDE = {"c": "character(5)", "ci": "citext", "u": "uuid", "r": "real", "m": "money", "tm": "time without time zone",
        "iv": "interval", "n": "numeric", "d": "date", "ts": "timestamp(3) without time zone",
        "tz": "timestamp with time zone", "i": "integer", "t": "text"}


def wide(text, **row):
    return compile_filter(text, WIDE)(row)


def test_values_as_postgres_compares_them():
    assert wide("c = 'ab'", c="ab   ") and wide("c in ('ab')", c="ab   ")            # char(n) pads
    assert wide("ci = 'A@X.io'", ci="a@x.io")                                           # citext ignores case
    assert wide("u = 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'", u="a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")
    assert not wide("r = 0.1", r=0.1) and wide("r > 0.1", r=0.1)                       # a real widened to float8
    assert wide("m > 0", m="12.50")
    assert wide("n > 0", n="POSITIVE_INFINITY") and not wide("n > 0", n="NEGATIVE_INFINITY")
    assert wide("n > 99999", n="NAN") and wide("n = 'NaN'".replace("'NaN'", "1"), n="1")
    assert wide("d = '-infinity'", d=-625_821_272) and wide("d = 'infinity'", d=-622_191_234)   # snapshot overflows
    assert wide("ts = 'infinity'", ts=9_223_372_036_825_200_000 + 3_600_000)


def test_a_value_in_a_columns_old_type_is_unknown_not_a_crash():
    # Around an ALTER COLUMN TYPE a record may carry the old type's value (connectors/typed_values.py).
    assert not wide("tz > '2024-01-01 00:00:00+00'", tz=1704067200000)
    assert not wide("t < 'b'", t=7) and not wide("i = 7", i="7.5") and not wide("ts > '2024-01-01'", ts="2024-01-01T00")
    assert wide("not (tz > '2024-01-01 00:00:00+00') or tz is not null", tz=1)


@pytest.mark.parametrize("text, words", [("tm = '10:00:00'", "only 'is null'"), ("iv = '1 day'", "only 'is null'"),
                                         ("tz > '2024-01-01 10:00:00'", "with its zone"), ("u = 'nope'", "uuid"),
                                         ("ci starts with 'a'", "applies to text")])
def test_types_whose_wire_form_is_not_their_text_take_only_what_is_exact(text, words):
    with pytest.raises(FilterError) as exc:
        compile_filter(text, WIDE)
    assert words in str(exc.value), str(exc.value)


def test_the_sql_twin_casts_money_and_orders_text_by_code_point():
    from connectors.row_filter import store_sql

    assert store_sql("m > 0 and t < 'b'", None, WIDE) == '(("m"::numeric > 0) AND ("t" COLLATE "C" < \'b\'))'
