"""The `documents:` section: checked up front (errors name the field), then resolved against the
catalog (joins from foreign keys, columns that exist)."""
import copy

import pytest

from derived.nested import Relation, Through
from pipelines.documents.document_specs import resolve_documents
from pipelines.config import parse_config
from pipelines.errors import ConfigError
from tests.support.configs import BASE

TABLES = ["public.orders", "public.lines", "public.customers", "public.order_tags", "public.tags"]
DOC = {"name": "orders", "root": "public.orders", "redis_key": "order:{id}", "relations": [
    {"label": "lines", "table": "public.lines", "type": "one_to_many", "join": {"order_id": "id"},
     "order_by": "line_no", "columns": ["sku", "qty", "line_no"]},
    {"label": "customer", "table": "public.customers", "type": "many_to_one", "join": {"customer_id": "id"},
     "columns": ["name"]},
    {"label": "tags", "table": "public.order_tags", "type": "many_to_many", "through": {"table": "public.tags"},
     "columns": ["name"]},
]}


def config(doc=None, **edits):
    data = copy.deepcopy(BASE)
    data["tables"] = [{"name": t} for t in TABLES]
    data["documents"] = [copy.deepcopy(doc or DOC)]
    data.update(edits)
    return data


class FakeCatalog:
    COLUMNS = {"public.orders": {"id": "bigint", "customer_id": "integer", "status": "text"},
               "public.lines": {"id": "integer", "order_id": "bigint", "line_no": "integer", "sku": "text",
                                "qty": "integer"},
               "public.customers": {"id": "integer", "name": "text"},
               "public.order_tags": {"order_id": "bigint", "tag_id": "integer"},
               "public.tags": {"id": "integer", "name": "text"}}
    KEYS = {"public.order_tags": ("order_id", "tag_id")}
    FKS = {("public.order_tags", "public.orders"): [{"order_id": "id"}],
           ("public.order_tags", "public.tags"): [{"tag_id": "id"}]}

    def columns(self, table):
        return self.COLUMNS.get(table)

    def primary_key(self, table):
        return self.KEYS.get(table, ("id",))

    def foreign_keys(self, table, references):
        return self.FKS.get((table, references), [])


def test_resolved_with_joins_from_the_foreign_keys():
    resolved = resolve_documents(parse_config(config()), FakeCatalog())
    (spec,) = resolved.specs
    assert spec.relations[2] == Relation("tags", "public.order_tags", "many_to_many", (("order_id", "id"),),
                                         ("name",), None, Through("public.tags", (("tag_id", "id"),)))
    assert resolved.keys["public.order_tags"] == ("order_id", "tag_id")
    assert spec.tables() == set(TABLES)


@pytest.mark.parametrize("path, value, field", [
    ("relations.2.through", None, "documents.0.relations.2"),
    ("relations.1.order_by", "name", "documents.0.relations.1.order_by"),
    ("relations.0.order_by", "price", "documents.0.relations.0.order_by"),
    ("relations.0.label", "customer", "documents.0"),
    ("relations.0.type", "one_to_one", "documents.0.relations.0.type"),
    ("redis_key", "order:{id}{x}", "documents.0.redis_key"),
    ("index", "Orders", "documents.0.index"),
    ("relations", [], "documents.0.relations"),
])
def test_config_mistakes_name_the_field(path, value, field):
    doc = copy.deepcopy(DOC)
    node = doc
    parts = path.split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node[part]
    node[int(parts[-1]) if parts[-1].isdigit() else parts[-1]] = value
    with pytest.raises(ConfigError) as err:
        parse_config(config(doc))
    assert err.value.field == field, str(err.value)


def test_documents_need_their_own_index_and_key_prefix():
    data = config()
    data["tables"][0]["index"] = "orders"
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    assert err.value.field == "documents.0.index"
    data = config()
    data["tables"][0]["redis_key"] = "order:{id}"
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    assert "redis_key" in err.value.field


@pytest.mark.parametrize("edit, field, words", [
    (("relations", 0, "join"), "documents.0.relations.0.join", "no column"),
    (("relations", 2, "through"), "documents.0.relations.2.through.join", "no foreign key"),
    (("relations", 0, "columns"), "documents.0.relations.0.columns", "no column"),
])
def test_catalog_mistakes_name_the_field(edit, field, words):
    doc = copy.deepcopy(DOC)
    where, i, what = edit
    if what == "join":
        doc[where][i]["join"] = {"order_ref": "id"}
    elif what == "through":
        doc[where][i]["through"] = {"table": "public.customers"}
    else:
        doc[where][i]["columns"] = ["sku", "colour", "line_no"]
    with pytest.raises(ConfigError) as err:
        resolve_documents(parse_config(config(doc)), FakeCatalog())
    assert err.value.field == field and words in str(err.value), str(err.value)


@pytest.mark.parametrize("edit, field", [
    ({"redis_key": "order:{status}"}, "documents.0.redis_key"),
    ({"relations.0.label": "status"}, "documents.0.relations.0.label"),
    ({"relations.0.order_by": "tags", "relations.0.columns": None}, "documents.0.relations.0.order_by"),
])
def test_what_only_the_catalog_can_tell_names_the_field(edit, field):
    doc = copy.deepcopy(DOC)
    for path, value in edit.items():
        node, parts = doc, path.split(".")
        for part in parts[:-1]:
            node = node[int(part)] if part.isdigit() else node[part]
        node[parts[-1]] = value
    catalog = FakeCatalog()
    catalog.COLUMNS = {**catalog.COLUMNS, "public.lines": {**catalog.COLUMNS["public.lines"], "tags": "text[]"}}
    with pytest.raises(ConfigError) as err:
        resolve_documents(parse_config(config(doc)), catalog)
    assert err.value.field == field, str(err.value)


def test_scalar_relations_and_null_for_empty_lists_resolve_from_the_document_and_the_relation():
    doc = copy.deepcopy(DOC)
    doc["null_when_empty"] = True
    doc["relations"][2] = {"label": "tags", "table": "public.order_tags", "type": "many_to_many",
                           "through": {"table": "public.tags"}, "value": "name"}
    doc["relations"][0]["null_when_empty"] = False   # a relation's own choice wins
    doc["relations"][1] = {"label": "customer", "table": "public.customers", "type": "many_to_one",
                           "join": {"customer_id": "id"}, "value": "name"}
    lines, customer, tags = resolve_documents(parse_config(config(doc)), FakeCatalog()).specs[0].relations
    assert (tags.value, tags.empty_null, tags.columns) == ("name", True, None)
    assert (lines.value, lines.empty_null) == (None, False)
    assert (customer.value, customer.empty_null) == ("name", False)


@pytest.mark.parametrize("relation, field, words", [
    ({"value": "name", "columns": ["name"]}, "documents.0.relations.2", "takes no 'columns'"),
    ({"value": "name", "relations": [{"label": "x", "table": "public.lines", "type": "one_to_many"}]},
     "documents.0.relations.2", "nested 'relations'"),
])
def test_a_scalar_relation_with_columns_or_relations_is_refused(relation, field, words):
    doc = copy.deepcopy(DOC)
    doc["relations"][2] = {"label": "tags", "table": "public.order_tags", "type": "many_to_many",
                           "through": {"table": "public.tags"}, **relation}
    with pytest.raises(ConfigError) as err:
        parse_config(config(doc))
    assert err.value.field == field and words in str(err.value), str(err.value)


def test_empty_is_for_lists_and_a_value_must_be_a_column():
    doc = copy.deepcopy(DOC)
    doc["relations"][1]["null_when_empty"] = True
    with pytest.raises(ConfigError) as err:
        parse_config(config(doc))
    assert err.value.field == "documents.0.relations.1" and "for lists" in str(err.value)
    doc = copy.deepcopy(DOC)
    doc["relations"][2] = {"label": "tags", "table": "public.order_tags", "type": "many_to_many",
                           "through": {"table": "public.tags"}, "value": "title"}
    with pytest.raises(ConfigError) as err:
        resolve_documents(parse_config(config(doc)), FakeCatalog())
    assert err.value.field == "documents.0.relations.2.value" and "no column" in str(err.value)


def test_a_table_only_documents_read_is_captured_without_stores_of_its_own():
    """Not listed in `tables`: added as documents_only (the connector captures it; no index, no keys)."""
    data = config()
    data["tables"] = [{"name": "public.orders"}]
    cfg = parse_config(data)
    assert [(t.name, t.documents_only) for t in cfg.tables] == [
        ("public.orders", False), ("public.lines", True), ("public.customers", True), ("public.order_tags", True),
        ("public.tags", True)]
    assert [t.name for t in cfg.flat_tables] == ["public.orders"]
    again = parse_config(cfg.model_dump(mode="json"))   # what executors parse: the same config
    assert again == cfg
    from pipelines.apply.stores import stores_from_config

    stores = stores_from_config(cfg)
    assert set(stores.search_tables) == set(stores.cache_tables) == {"public.orders", "document:orders"}
    with pytest.raises(ConfigError) as err:
        resolve_documents(parse_config(config(copy.deepcopy(DOC) | {"root": "public.nope"})), FakeCatalog())
    assert err.value.field == "documents.0.root" and "does not exist" in str(err.value)


def test_a_documents_only_table_takes_no_store_settings():
    data = config()
    data["tables"][1] = {"name": "public.lines", "documents_only": True, "index": "lines"}
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    assert err.value.field == "tables.1" and "index" in str(err.value)


@pytest.mark.parametrize("edit, field, words", [
    ({"relations.0.rename": {"price": "cost"}}, "documents.0.relations.0", "outside 'columns'"),
    ({"relations.0.rename": {"sku": "qty"}}, "documents.0.relations.0.rename", "two fields"),
    ({"rename": {"status": "customer"}}, "documents.0", "clash with fields"),
    ({"rename": {"colour": "color"}}, "documents.0.rename", "no column"),
    ({"relations.2": {"label": "tags", "table": "public.order_tags", "type": "many_to_many",
                      "through": {"table": "public.tags"}, "value": "name", "rename": {"name": "n"}}},
     "documents.0.relations.2", "'rename'"),
])
def test_rename_mistakes_name_the_field(edit, field, words):
    doc = copy.deepcopy(DOC)
    for path, value in edit.items():
        node, parts = doc, path.split(".")
        for part in parts[:-1]:
            node = node[int(part)] if part.isdigit() else node[part]
        node[int(parts[-1]) if parts[-1].isdigit() else parts[-1]] = value
    with pytest.raises(ConfigError) as err:
        resolve_documents(parse_config(config(doc)), FakeCatalog())
    assert err.value.field == field and words in str(err.value), str(err.value)


def test_renames_reach_the_specs():
    doc = copy.deepcopy(DOC)
    doc["rename"] = {"status": "state"}
    doc["relations"][0]["rename"] = {"qty": "quantity"}
    spec = resolve_documents(parse_config(config(doc)), FakeCatalog()).specs[0]
    assert spec.rename == (("status", "state"),) and spec.relations[0].rename == (("qty", "quantity"),)


def test_a_many_to_many_reads_the_same_named_by_the_rows_table_and_its_link():
    """`table:` the rows the list holds and `link:` the table between: the same relation as
    `table:` the link and `through:` the rows, in the order a pgsync user reads it."""
    doc = copy.deepcopy(DOC)
    doc["relations"][2] = {"label": "tags", "table": "public.tags", "type": "many_to_many",
                           "link": {"table": "public.order_tags"}, "columns": ["name"]}
    linked = resolve_documents(parse_config(config(doc)), FakeCatalog()).specs[0]
    through = resolve_documents(parse_config(config()), FakeCatalog()).specs[0]
    assert linked == through
    doc["relations"][2]["join"] = {"order_id": "id"}
    with pytest.raises(ConfigError) as err:
        parse_config(config(doc))
    assert err.value.field == "documents.0.relations.2" and "link.join" in str(err.value)


def test_meta_reaches_the_spec_and_refuses_tables_of_one_name_or_a_field_of_its_name():
    doc = copy.deepcopy(DOC)
    doc["meta"] = True
    assert resolve_documents(parse_config(config(doc)), FakeCatalog()).specs[0].meta
    assert not resolve_documents(parse_config(config()), FakeCatalog()).specs[0].meta
    doc["rename"] = {"status": "_meta"}
    with pytest.raises(ConfigError, match="already has a field '_meta'"):
        parse_config(config(doc))
    doc["rename"] = {}
    FakeCatalog.COLUMNS["public.orders"]["_meta"] = "text"   # every column kept: the catalog's
    try:
        with pytest.raises(ConfigError, match="has a column '_meta'") as err:
            resolve_documents(parse_config(config(doc)), FakeCatalog())
        assert err.value.field == "documents.0.meta"
        doc["rename"] = {"_meta": "meta_text"}
        resolve_documents(parse_config(config(doc)), FakeCatalog())
    finally:
        del FakeCatalog.COLUMNS["public.orders"]["_meta"]
    twice = copy.deepcopy(DOC)
    twice["meta"] = True
    twice["relations"][1]["table"] = "sales.orders"   # beside the root public.orders
    data = config(twice)
    data["tables"].append({"name": "sales.orders"})
    with pytest.raises(ConfigError, match="share a name") as err:
        parse_config(data)
    assert err.value.field.startswith("documents.0"), err.value.field
