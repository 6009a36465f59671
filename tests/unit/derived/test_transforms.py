"""Computed fields (derived/transforms.py) and the fields a store leaves out, as shape() makes the
documents both sinks and `verify` hold."""
import pytest

from derived.shape import shape, shaped_field
from derived.sinks.search.sink import SearchTable
from derived.transforms import TransformError, check, columns_read, date_part

FIELDS = {
    "full_name": {"concat": ["first", {"text": " "}, "last"]},
    "email_lc": {"lower": "email"},
    "code": {"upper": "plan"},
    "tier": {"map": {"column": "plan", "values": {"p1": "gold", "p2": "silver"}, "default": "other"}},
    "active_label": {"map": {"column": "active", "values": {"true": "yes", "false": "no"}}},
    "year": {"date_part": {"column": "signed", "part": "year"}},
    "source": {"constant": "pg"},
}


def test_each_operation_on_typed_values():
    row = {"id": 1, "first": "Ada", "last": None, "email": "A@X.io", "plan": "p1", "active": True,
           "signed": "2024-03-15T10:00:00.5Z", "secret": "s"}
    doc = shape(row, SearchTable("users", rename={"email": "mail"}, computed=FIELDS, remove=("secret",)))
    assert doc == {"id": 1, "first": "Ada", "last": None, "mail": "A@X.io", "plan": "p1", "active": True,
                   "signed": "2024-03-15T10:00:00.5Z", "full_name": "Ada ", "email_lc": "a@x.io", "code": "P1",
                   "tier": "gold", "active_label": "yes", "year": 2024, "source": "pg"}
    other = shape({"plan": None, "email": None, "active": None, "signed": "infinity"}, SearchTable("u", computed=FIELDS))
    assert other["tier"] == "other" and other["email_lc"] is None and other["year"] is None
    assert other["active_label"] is None and other["full_name"] == " "


@pytest.mark.parametrize("value, part, want", [
    ("2024-03-15", "dow", 5), ("2024-03-15", "doy", 75), ("2024-03-15", "quarter", 1), ("1970-01-02", "epoch", 86400),
    ("-0043-03-15", "year", -43), ("+10000-01-01", "year", 10000), ("2024-03-15T10:20:30.25", "second", 30.25),
    ("2024-03-15T10:00:00+02:00", "epoch", 1710489600), ("2024-03-15T10:00:00", "hour", 10), ("x", "year", None),
    (20000, "year", None),
])
def test_date_parts(value, part, want):
    assert date_part(value, part) == want


@pytest.mark.parametrize("spec", [{"lower": ["a"]}, {"concat": []}, {"concat": [{"txt": "x"}]}, {"trim": "a"},
                                  {"map": {"column": "a"}}, {"date_part": {"column": "a", "part": "week"}},
                                  {"lower": "a", "upper": "b"}])
def test_malformed_fields_are_refused(spec):
    with pytest.raises(TransformError):
        check(spec)


def test_columns_read_and_removed_fields():
    assert columns_read(FIELDS["full_name"]) == {"first", "last"} and columns_read(FIELDS["source"]) == set()
    t = SearchTable("u", remove=("email",))
    assert shaped_field("email", t) is None and shaped_field("id", t) == "id"
