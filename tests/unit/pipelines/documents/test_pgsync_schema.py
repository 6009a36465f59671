"""pgsync schema files read as cdckit config: every key mapped or refused by file, node path and key."""
import copy

from pipelines.config import parse_config
from pipelines.documents.pgsync_schema import convert

SOCIAL = [{"database": "social", "index": "social1", "nodes": {
    "table": "user", "columns": ["name", "age", "gender"],
    "children": [
        {"table": "tag", "label": "tags", "columns": ["name"],
         "relationship": {"type": "one_to_many", "variant": "scalar", "through_tables": ["user_tag"]}},
        {"table": "post", "label": "posts", "columns": ["slug", "title"],
         "relationship": {"type": "one_to_many", "variant": "object", "through_tables": ["user_post"]},
         "children": [{"table": "comment", "label": "comments", "columns": ["title", "content"],
                       "relationship": {"type": "one_to_many", "variant": "object",
                                        "through_tables": ["post_comment"]}}]},
        {"table": "profile", "columns": ["bio"], "transform": {"rename": {"bio": "about"},
                                                               "mapping": {"about": {"type": "text"}}},
         "relationship": {"type": "one_to_one", "variant": "object"}},
        {"table": "address", "label": "city", "columns": ["city"],
         "relationship": {"type": "one_to_one", "variant": "scalar",
                          "foreign_key": {"child": ["id"], "parent": ["address_id"]}}},
    ]}}]


class Catalog:
    """Foreign keys as Postgres has them: (table, references) -> [{column: referenced column}]."""

    KEYS = {("public.user_tag", "public.user"): [{"user_id": "id"}], ("public.user_tag", "public.tag"): [{"tag_id": "id"}],
            ("public.user_post", "public.user"): [{"user_id": "id"}], ("public.user_post", "public.post"): [{"post_id": "id"}],
            ("public.post_comment", "public.post"): [{"post_id": "id"}],
            ("public.post_comment", "public.comment"): [{"comment_id": "id"}],
            ("public.profile", "public.user"): [{"user_id": "id"}]}   # the child holds the reference

    def foreign_keys(self, table, references):
        return self.KEYS.get((table, references), [])


BASE = {"postgres": {"database": "x", "user": "u"}, "kafka": {"bootstrap_servers": "k:9092"},
        "connect": {"url": "http://c:8083"}, "search": {"kind": "opensearch", "url": "http://s:9200"},
        "redis": {"url": "redis://r:6379/0"}, "sinks": ["search"]}


def test_the_social_example_becomes_one_document_over_documents_only_tables():
    conv = convert(SOCIAL, Catalog(), "social.json")
    assert conv.refused == []
    cfg = conv.configs["social"]
    assert [t["name"] for t in cfg["tables"]] == [
        "public.user", "public.user_tag", "public.tag", "public.user_post", "public.post", "public.post_comment",
        "public.comment", "public.profile", "public.address"]
    assert all(t["documents_only"] for t in cfg["tables"])
    (doc,) = cfg["documents"]
    assert doc["root"] == "public.user" and doc["null_when_empty"] and doc["columns"] == ["name", "age", "gender"]
    tags, posts, profile, city = doc["relations"]
    assert tags == {"label": "tags", "table": "public.tag", "type": "many_to_many",
                    "link": {"table": "public.user_tag", "join": {"user_id": "id"}, "to": {"tag_id": "id"}},
                    "value": "name"}
    assert posts["relations"][0]["link"]["table"] == "public.post_comment"
    # one_to_one whose child holds the key: one object, joined the other way round
    assert profile == {"label": "profile", "table": "public.profile", "type": "many_to_one", "join": {"id": "user_id"},
                       "columns": ["bio"], "rename": {"bio": "about"}}
    # foreign_key as written: the parent's address_id = the child's id
    assert city == {"label": "city", "table": "public.address", "type": "many_to_one", "join": {"address_id": "id"},
                    "value": "city"}
    assert doc["mappings"] == {"profile.about": {"type": "text"}}
    parse_config({**BASE, **cfg})   # a config cdckit accepts as it is


def test_without_a_catalog_the_joins_are_left_to_cdckits_start():
    conv = convert(SOCIAL, None, "social.json")
    tags = conv.configs["social"]["documents"][0]["relations"][0]
    assert tags["link"] == {"table": "public.user_tag"}   # no join, no to


def test_what_has_no_equivalent_is_refused_by_file_node_path_and_key():
    schema = copy.deepcopy(SOCIAL)
    root = schema[0]
    root.update(plugins=["Groot"], routing="isbn", pipeline="p", colour="red")
    root["nodes"]["columns"].append("doc->x")
    root["nodes"]["children"][2]["transform"]["concat"] = [{"columns": ["a"], "destination": "b"}]
    root["nodes"]["children"][1]["children"][0]["transform"] = {"move": {"x": "y"}}
    root["nodes"]["children"][0]["columns"] = ["name", "id"]
    root["nodes"]["children"].append({"table": "x", "relationship": {"type": "many_to_many", "variant": "object"}})
    refused = dict(convert(schema, Catalog(), "social.json").refused)
    assert set(refused) == {
        "social.json: [0].colour", "social.json: [0].plugins", "social.json: [0].routing", "social.json: [0].pipeline",
        "social.json: [0].nodes.columns[3]", "social.json: [0].nodes.children[2].transform.concat",
        "social.json: [0].nodes.children[1].children[0].transform.move", "social.json: [0].nodes.children[0].columns",
        "social.json: [0].nodes.children[4].relationship"}
    assert "JSON operators" in refused["social.json: [0].nodes.columns[3]"]
    assert "exactly one" in refused["social.json: [0].nodes.children[0].columns"]


def test_a_missing_or_ambiguous_foreign_key_is_refused_naming_the_relationship():
    schema = [{"database": "d", "nodes": {"table": "a", "children": [
        {"table": "b", "relationship": {"type": "one_to_many", "variant": "object"}}]}}]
    refused = convert(schema, Catalog(), "s.json").refused
    assert refused == [("s.json: [0].nodes.children[0].relationship.foreign_key",
                        "no foreign key between public.b and public.a in the catalog: name the columns in foreign_key")]


def test_several_databases_give_one_config_each_and_one_database_several_documents():
    schema = copy.deepcopy(SOCIAL) + [{"database": "shop", "index": "orders", "nodes": {
        "table": "orders", "schema": "sales", "primary_key": ["order_no"], "children": [
            {"table": "lines", "schema": "sales", "relationship": {"type": "one_to_many", "variant": "object",
                                                                  "foreign_key": {"child": ["order_no"],
                                                                                  "parent": ["order_no"]}}}]}}]
    schema.append(copy.deepcopy(SOCIAL[0]) | {"index": "social2"})
    conv = convert(schema, Catalog(), "s.json")
    assert conv.refused == []
    assert sorted(conv.configs) == ["shop", "social"]
    assert [d["name"] for d in conv.configs["social"]["documents"]] == ["social1", "social2"]
    shop = conv.configs["shop"]
    assert shop["tables"][0] == {"name": "sales.orders", "documents_only": True, "key": ["order_no"]}
    assert shop["documents"][0]["relations"][0]["join"] == {"order_no": "order_no"}
    parse_config({**BASE, **conv.configs["social"]})
