import pytest

from connectors.table_shape import SchemaChange
from pipelines.schema.plan import plan

T = "public.t"


def make(changes, policy="evolve", columns=None, renames=None, same=lambda a, b: a == b):
    return plan(T, changes, policy, columns, lambda c: (renames or {}).get(c, c), same)


def test_an_added_nullable_column_only_extends_the_mapping():
    p = make([SchemaChange(T, "added", "note")])
    assert (p.extend_mapping, p.resnapshot, p.rebuild, p.stop) == (["note"], False, [], None)


@pytest.mark.parametrize("change", [SchemaChange(T, "added_with_default", "status"), SchemaChange(T, "dropped", "x"),
                                    SchemaChange(T, "renamed", "full_name", old="name")])
def test_changes_that_rewrite_rows_without_events_re_read_the_table(change):
    p = make([change])
    assert p.resnapshot and p.rebuild == [] and p.stop is None


def test_a_type_change_rebuilds_search_only_when_the_mapping_differs():
    same = make([SchemaChange(T, "retyped", "n", old="integer", new="bigint")], same=lambda a, b: True)
    assert same.resnapshot and same.rebuild == []
    other = make([SchemaChange(T, "retyped", "n", old="integer", new="text")], same=lambda a, b: False)
    assert other.resnapshot and other.rebuild == ["search"]


def test_rebuild_policy_re_reads_and_rebuilds_both_stores():
    p = make([SchemaChange(T, "added", "note")], policy="rebuild")
    assert p.resnapshot and p.rebuild == ["search", "cache"]


def test_stop_policy_names_the_change_and_the_commands():
    p = make([SchemaChange(T, "dropped", "email")], policy="stop")
    assert "column email dropped" in p.stop and f"cdckit snapshot resync {T}" in p.stop
    assert not p.resnapshot


def test_projected_away_columns_change_no_document():
    assert make([SchemaChange(T, "dropped", "secret")], columns=["id", "name"]) is None
    renamed = make([SchemaChange(T, "renamed", "label", old="name")], columns=["id", "name"])
    assert renamed is not None and renamed.resnapshot


def test_mapping_fields_follow_the_configured_renames():
    p = make([SchemaChange(T, "added", "nm")], renames={"nm": "name"})
    assert p.extend_mapping == ["name"]
    assert "column nm added" in p.describe() and "index mapping extended with name" in p.describe()
