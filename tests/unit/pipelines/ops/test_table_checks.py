import copy

import pytest

from connectors.postgres import KeyIdentity
from pipelines.config import parse_config
from pipelines.errors import ConfigError
from pipelines.ops.table_checks import check_tables
from tests.support.configs import BASE

DEFAULT = KeyIdentity(("id",), "default", ("id",))


def config(**table):
    data = copy.deepcopy(BASE)
    data["tables"] = [{"name": "public.customers", **table}]
    return parse_config(data)


def refused(cfg, ident) -> ConfigError:
    with pytest.raises(ConfigError) as exc:
        check_tables(cfg, {"public.customers": ident})
    return exc.value


def test_a_primary_key_table_passes():
    check_tables(config(redis_key="c:{id}"), {"public.customers": DEFAULT})
    check_tables(config(), {"public.customers": DEFAULT})


def test_a_missing_table_is_named():
    assert "tables.0.name" in str(refused(config(), None))


def test_a_table_without_primary_key_needs_one():
    assert "tables.0.key" in str(refused(config(), KeyIdentity((), "default", ())))


def test_a_redis_placeholder_outside_the_primary_key_is_refused():
    err = refused(config(redis_key="c:{email}"), DEFAULT)
    assert "tables.0.redis_key" in str(err) and "email" in str(err)


def test_a_custom_key_outside_the_replica_identity_is_refused():
    err = refused(config(key=["email"], redis_key="c:{email}"), DEFAULT)
    assert "tables.0.key" in str(err) and "REPLICA IDENTITY FULL" in str(err)
    check_tables(config(key=["email"], redis_key="c:{email}"),
                 {"public.customers": KeyIdentity(("id",), "full", ("id", "email", "name"))})
    check_tables(config(key=["email"], redis_key="c:{email}"),
                 {"public.customers": KeyIdentity(("id",), "index", ("email",))})


def test_numeric_as_number_names_numeric_columns():
    cfg = config(numeric_as_number=["price", "fees"])
    check_tables(cfg, {"public.customers": DEFAULT}, {"public.customers": {"price": "numeric(12,2)", "fees": "money[]"}})
    with pytest.raises(ConfigError) as exc:
        check_tables(cfg, {"public.customers": DEFAULT}, {"public.customers": {"price": "numeric", "fees": "text"}})
    assert exc.value.field == "tables.0.numeric_as_number" and "fees is text" in str(exc.value)
    with pytest.raises(ConfigError, match="'fees' is not a column"):
        check_tables(cfg, {"public.customers": DEFAULT}, {"public.customers": {"price": "numeric"}})


TYPES = {"public.customers": {"id": "integer", "email": "text", "deleted_at": "timestamp with time zone",
                              "total": "numeric(12,2)", "active": "boolean", "full_name": "text"}}


@pytest.mark.parametrize("table, field, words", [
    ({"where": "emial = 'x'"}, "tables.0.where", "no column 'emial'"),
    ({"where": {"cache": "total > 'lots'"}}, "tables.0.where.cache", "total is numeric"),
    ({"soft_delete": {"column": "removed"}}, "tables.0.soft_delete.column", "not a column"),
    ({"soft_delete": {"column": "active", "value": "no"}}, "tables.0.soft_delete", "active is boolean"),
    ({"where": "full_name starts with 'A'"}, "tables.0.where", "generated column"),
])
def test_row_filters_are_checked_against_the_columns_types(table, field, words):
    with pytest.raises(ConfigError) as exc:
        check_tables(config(**table), {"public.customers": DEFAULT}, TYPES,
                     {"public.customers": ["full_name"]}, 170000)
    assert exc.value.field == field and words in str(exc.value), str(exc.value)


def test_a_fitting_filter_passes_and_a_generated_column_is_fine_from_postgres_18():
    check_tables(config(where="total > 0 and email starts with 'a'", soft_delete={"column": "deleted_at"}),
                 {"public.customers": DEFAULT}, TYPES)
    check_tables(config(where="full_name is not null"), {"public.customers": DEFAULT}, TYPES,
                 {"public.customers": ["full_name"]}, 180000)


def test_an_enum_is_compared_only_with_its_labels():
    types = {"public.customers": {"id": "integer", "tier": "customer_tier", "shape": "box_type"}}
    enums = {"customer_tier": ["gold", "silver"]}
    check_tables(config(where="tier in ('gold', 'silver')"), {"public.customers": DEFAULT}, types, enums=enums)
    with pytest.raises(ConfigError) as exc:
        check_tables(config(where="tier = 'golden'"), {"public.customers": DEFAULT}, types, enums=enums)
    assert "['golden'] are not labels of customer_tier" in str(exc.value)
    with pytest.raises(ConfigError) as exc:
        check_tables(config(soft_delete={"column": "shape", "value": "x"}), {"public.customers": DEFAULT}, types,
                     enums=enums)
    assert "not an enum" in str(exc.value)


def test_lookups_read_columns_the_table_has_with_a_text_form_and_score_by_numbers_or_times():
    types = {"public.customers": {"id": "integer", "region": "text", "tags": "text[]", "since": "timestamp with time zone",
                                  "note": "text", "at": "time without time zone"}}

    def check(*lookups, hook=None):
        cfg = config(lookups=list(lookups), **({"transform": {"hook": hook}} if hook else {}))
        check_tables(cfg, {"public.customers": DEFAULT}, types)

    check({"key": "by_region:{region}", "score": "since"}, {"key": "at:{region}", "score": "at"})
    for lookup, words in [({"key": "by_region:{regoin}"}, "no column 'regoin'"),
                          ({"key": "by_tag:{tags}"}, "one exact text form"),
                          ({"key": "by_since:{since}"}, "one exact text form"),   # two renderings of an instant
                          ({"key": "by_region:{region}", "member": "{region}"}, "must name the row"),
                          ({"key": "by_region:{region}", "score": "note"}, "a score is a number")]:
        with pytest.raises(ConfigError) as exc:
            check(lookup)
        assert exc.value.field.startswith("tables.0.lookups.0") and words in str(exc.value)
    check({"key": "by_segment:{segment}"}, hook="tests.support.hooks:body_length")   # the hook's row may carry it
