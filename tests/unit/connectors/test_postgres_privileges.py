import re

from connectors import postgres
from connectors.postgres_privileges import Facts, TableFacts, Wanted, missing
from connectors.postgres_roles import SCRIPT, render, variables

W = Wanted(["public.orders"], "public.hb", "public.sig", "public.marks", "cdckit", "cdckit_truncate_x")
ALL = frozenset({"SELECT", "INSERT", "UPDATE"})


def facts(**over) -> Facts:
    """A least-privilege role after connectors/sql/roles.sql: everything exists, nothing owned."""
    tables = {"public.orders": TableFacts("public.orders", True, privileges=frozenset({"SELECT"}), has_trigger=True),
              **{n: TableFacts(n, True, privileges=ALL) for n in ("public.hb", "public.sig", "public.marks")}}
    tables.update(over.pop("tables", {}))
    base = dict(user="cdc", database="app", replication=True, database_create=False, tables=tables,
                function_exists=True, public_create=False, publication_exists=True,
                publication_tables=frozenset(W.published))
    return Facts(**{**base, **over})


def test_a_role_set_up_by_the_script_lacks_nothing():
    assert missing(facts(), W) == []


def test_replication_and_select_are_named():
    lacking = missing(facts(replication=False, tables={"public.orders": TableFacts(
        "public.orders", True, schema_usage=False, has_trigger=True)}), W)
    assert lacking == ["REPLICATION (role attribute of cdc: Debezium streams through a replication slot)",
                       "USAGE on schema public", "SELECT on public.orders"]


def test_support_tables_name_the_rights_their_writers_use():
    tables = {n: TableFacts(n, True) for n in ("public.hb", "public.sig", "public.marks")}
    assert missing(facts(tables=tables), W) == [
        "SELECT on public.hb", "INSERT on public.hb", "UPDATE on public.hb",
        "SELECT on public.sig", "INSERT on public.sig", "SELECT on public.marks"]


def test_objects_still_to_create_need_create_rights_and_table_ownership():
    tables = {"public.orders": TableFacts("public.orders", True, privileges=frozenset({"SELECT"})),
              "public.hb": TableFacts("public.hb", False, schema_create=False)}
    lacking = missing(facts(tables=tables, function_exists=False, publication_exists=False,
                            publication_tables=frozenset()), W)
    assert lacking == [
        "TRIGGER on public.orders (to add the truncate marker trigger cdckit_truncate_x)",
        "CREATE on schema public (to create public.hb)",
        "CREATE on schema public (to create function public.cdckit_record_truncate)",
        "CREATE on database app (to create publication cdckit)",
        "ownership of public.orders (needed to add it to publication cdckit)",
        "ownership of public.sig (needed to add it to publication cdckit)",
        "ownership of public.marks (needed to add it to publication cdckit)"]


def test_a_publication_to_change_needs_its_ownership_and_every_tables():
    owned = {n: TableFacts(n, True, privileges=ALL | {"TRIGGER"}, owned=True, has_trigger=True) for n in W.published}
    assert missing(facts(tables=owned, publication_tables=frozenset({"public.orders"}), publication_owned=True), W) == []
    lacking = missing(facts(publication_tables=frozenset({"public.orders"})), W)
    assert lacking[0] == "ownership of publication cdckit (to set its tables)"
    assert "ownership of public.orders (needed to add it to publication cdckit)" in lacking


def test_a_missing_captured_table_is_left_to_the_table_checks():
    tables = {"public.orders": TableFacts("public.orders", False)}
    assert missing(facts(tables=tables, publication_tables=frozenset(W.published[1:])), W) == []


def test_the_script_is_rendered_with_every_variable_quoted():
    values = variables("cdc", "reader", ["public.orders", "s.it's"], "public.hb", "public.sig", "public.marks", "pub")
    text = render(values)
    assert not re.search(r":'\w+'", text)
    assert "'public.orders,s.it''s'" in text
    assert f"'{postgres.marker_trigger_name('public.marks')}'" in text


def test_the_script_creates_the_support_tables_as_cdckit_does():
    text = SCRIPT.read_text()
    for columns in (postgres.HEARTBEAT_COLUMNS, postgres.SIGNAL_COLUMNS, postgres.TRUNCATE_COLUMNS):
        assert f"%s ({columns})" in text
    # The truncate trigger's function is written once, there: cdckit creates it from the script's text.
    body = postgres.marker_function()
    assert body.startswith("CREATE OR REPLACE FUNCTION public.cdckit_record_truncate()") and body.endswith("END $$")
    assert text.count("FUNCTION public.cdckit_record_truncate()") == 1


def test_role_names_are_checked():
    import pytest

    for bad in (("a b", "r"), ("same", "same")):
        with pytest.raises(ValueError):
            variables(*bad, ["public.t"], "public.hb", "public.sig", "public.marks", "pub")
