import pytest

from derived.sinks.search.definition import (DATE_FORMAT, DefinitionOptions, differences, field_mapping,
                                             index_definition, index_settings, split_type, with_gc_deletes)

TEXT = {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}}
DATE = {"type": "date", "format": DATE_FORMAT, "ignore_malformed": True}


@pytest.mark.parametrize("pg_type,mapping", [
    ("integer", {"type": "long"}), ("bigint", {"type": "long"}), ("smallint", {"type": "long"}),
    ("real", {"type": "float"}), ("double precision", {"type": "double"}),
    ("numeric(12,2)", {"type": "keyword"}), ("numeric", {"type": "keyword"}), ("money", {"type": "keyword"}),
    ("boolean", {"type": "boolean"}), ("bit(1)", {"type": "boolean"}), ("bit varying(8)", {"type": "keyword"}),
    ("text", TEXT), ("character varying(40)", TEXT), ("character(3)", TEXT), ("xml", TEXT), ("tsvector", TEXT),
    ("mood", TEXT), ('"MixedCase"', TEXT), ("citext", TEXT),
    ("date", DATE), ("timestamp without time zone", DATE), ("timestamp(3) without time zone", DATE),
    ("timestamp with time zone", DATE), ("time without time zone", {"type": "keyword"}),
    ("time(3) with time zone", {"type": "keyword"}), ("interval", {"type": "keyword"}),
    ("interval second(3)", {"type": "keyword"}),
    ("json", {"type": "object"}), ("jsonb", {"type": "object"}), ("hstore", {"type": "object"}),
    ("uuid", {"type": "keyword"}), ("inet", {"type": "keyword"}), ("cidr", {"type": "keyword"}),
    ("macaddr", {"type": "keyword"}), ("int4range", {"type": "keyword"}), ("tstzrange", {"type": "keyword"}),
    ("bytea", {"type": "binary"}), ("point", None),
    ("integer[]", {"type": "long"}), ("timestamp with time zone[]", DATE), ("text[]", TEXT),
])
def test_field_mapping_by_type(pg_type, mapping):
    assert field_mapping(pg_type) == mapping


@pytest.mark.parametrize("pg_type,mapping", [
    ("numeric(12,2)", {"type": "scaled_float", "scaling_factor": 100, "ignore_malformed": True}),
    ("numeric(10,4)[]", {"type": "scaled_float", "scaling_factor": 10_000, "ignore_malformed": True}),
    ("numeric(12,0)", {"type": "double", "ignore_malformed": True}),
    ("numeric", {"type": "double", "ignore_malformed": True}),
    ("numeric(30,2)", {"type": "double", "ignore_malformed": True}),   # value * 100 could overflow scaled_float's long
    ("money", {"type": "scaled_float", "scaling_factor": 100, "ignore_malformed": True}),
])
def test_numbers_as_numbers(pg_type, mapping):
    assert field_mapping(pg_type, as_number=True) == mapping


def test_text_and_json_options():
    assert field_mapping("text", text="keyword") == {"type": "keyword", "ignore_above": 8191}
    assert field_mapping("varchar(5)", text="text") == {"type": "text"}
    assert field_mapping("jsonb", json="flattened") == {"type": "flattened"}
    assert field_mapping("jsonb", json="flattened", kind="opensearch") == {"type": "flat_object"}
    assert field_mapping("uuid", text="text") == {"type": "keyword"}  # not a text column


def test_split_type():
    assert split_type("numeric(12,2)[]") == ("numeric", ["12", "2"], True)
    assert split_type("timestamp(3) with time zone") == ("timestamp with time zone", ["3"], False)


TYPES = {"id": "bigint", "amount": "numeric(12,2)", "price": "numeric(8,3)", "born": "date", "doc": "jsonb",
         "secret": "text", "email": "character varying(80)", "at": "point"}


def test_index_definition_projection_renames_options_and_overrides():
    options = DefinitionOptions(columns=["id", "amount", "price", "born", "doc", "email", "at"],
                                rename={"born": "birthday"}, numeric_as_number=["price"], text="keyword",
                                json="object", dynamic=False, kind="elasticsearch",
                                settings={"number_of_shards": 2, "index.refresh_interval": "5s"},
                                mappings={"email": {"type": "keyword"}, "extra": {"type": "long"}}, gc_deletes_s=3600)
    d = index_definition(TYPES, options)
    assert d["settings"] == {"index": {"number_of_shards": 2, "refresh_interval": "5s", "gc_deletes": "3600s"}}
    assert d["mappings"] == {"dynamic": False, "properties": {
        "id": {"type": "long"}, "amount": {"type": "keyword"},
        "price": {"type": "scaled_float", "scaling_factor": 1000, "ignore_malformed": True}, "birthday": DATE, "doc": {"type": "object"},
        "email": {"type": "keyword"}, "extra": {"type": "long"}},
        "dynamic_templates": [
            {"doc_integers": {"path_match": "doc.*", "match_mapping_type": "long", "mapping": {"type": "double"}}},
            {"doc_fractions": {"path_match": "doc.*", "match_mapping_type": "double", "mapping": {"type": "double"}}}]}


def test_strict_index_still_maps_json_content():
    d = index_definition({"doc": "jsonb"}, DefinitionOptions(dynamic="strict"))
    assert d["mappings"]["properties"]["doc"] == {"type": "object", "dynamic": True}


def test_settings_spellings_merge_to_one_nested_form():
    assert index_settings({"index": {"analysis": {"analyzer": {"a": {"type": "custom", "tokenizer": "standard"}}}},
                           "index.number_of_replicas": 0}, 60) == {
        "index": {"analysis": {"analyzer": {"a": {"tokenizer": "standard", "type": "custom"}}},
                  "number_of_replicas": 0, "gc_deletes": "60s"}}


def test_with_gc_deletes_keeps_a_given_one():
    assert with_gc_deletes(None, 60) == {"settings": {"index": {"gc_deletes": "60s"}}}
    given = {"settings": {"index.gc_deletes": "10s"}, "mappings": {}}
    assert with_gc_deletes(given, 60)["settings"] == {"index": {"gc_deletes": "10s"}}
    assert with_gc_deletes({"mappings": {"properties": {}}}, None) == {"mappings": {"properties": {}}}


WANTED = index_definition({"id": "bigint", "at": "timestamp with time zone", "doc": "jsonb", "name": "text",
                           "n": "numeric(12,2)"},
                          DefinitionOptions(numeric_as_number=["n"], settings={"number_of_replicas": 0,
                                                                                "refresh_interval": "1s"},
                                            gc_deletes_s=86_400))
# What an engine answers for an index created with WANTED, after some writes.
LIVE = {
    "settings": {"index": {"number_of_replicas": "0", "refresh_interval": "1s", "gc_deletes": "86400s",
                           "number_of_shards": "1", "uuid": "x", "provided_name": "t_v1",
                           "creation_date": "1700000000000", "version": {"created": "136387927"}}},
    "mappings": {"properties": {
        "id": {"type": "long"}, "at": {"type": "date", "ignore_malformed": True},  # without the default format
        "doc": {"properties": {"k": {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}}}},
        "name": {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}},
        "n": {"type": "scaled_float", "scaling_factor": 100.0, "ignore_malformed": True},
        "added_dynamically": {"type": "long"}}},
}


def test_no_differences_for_what_engines_add_or_normalise():
    assert differences(WANTED, LIVE) == []


def test_differences_name_each_setting_and_field():
    live = {"settings": {"index": {**LIVE["settings"]["index"], "refresh_interval": "30s"}},
            "mappings": {"dynamic": "strict", "properties": {**LIVE["mappings"]["properties"], "at": {"type": "keyword"}}}}
    del live["settings"]["index"]["gc_deletes"]
    del live["mappings"]["properties"]["name"]
    assert differences(WANTED, live) == [
        "settings index.gc_deletes: config 86400s, live not set",
        "settings index.refresh_interval: config 1s, live 30s",
        "mappings dynamic: config true, live strict",
        "mappings properties.at.type: config date, live keyword",
        "mappings properties.at.ignore_malformed: config true, live not set",
        'mappings properties.name: config {"fields": {"keyword": {"ignore_above": 256, "type": "keyword"}}, '
        '"type": "text"}, live not mapped',
    ]


def test_differences_inside_subfields_and_analysis():
    wanted = {"settings": {"index": {"analysis": {"filter": {"f": {"type": "stop", "stopwords": ["a", "b"]}}}}},
              "mappings": {"properties": {"name": {"type": "text", "fields": {"raw": {"type": "keyword"}}}}}}
    live = {"settings": {"index": {"analysis": {"filter": {"f": {"type": "stop", "stopwords": ["a"]}}}}},
            "mappings": {"properties": {"name": {"type": "text"}}}}
    assert differences(wanted, live) == [
        'settings index.analysis.filter.f.stopwords: config ["a", "b"], live ["a"]',
        'mappings properties.name.fields.raw: config {"type": "keyword"}, live not mapped',
    ]
    assert differences(wanted, wanted) == []


def test_a_format_other_than_the_default_is_a_difference():
    wanted = {"mappings": {"properties": {"d": {"type": "date", "format": "yyyy"}}}}
    assert differences(wanted, {"mappings": {"properties": {"d": {"type": "date"}}}}) == [
        "mappings properties.d.format: config yyyy, live not set"]


def test_numbers_inside_json_objects_map_as_double_so_integers_and_fractions_share_a_field():
    from derived.sinks.search.definition import DefinitionOptions, index_definition

    mappings = index_definition({"id": "integer", "j": "jsonb", "f": "jsonb"},
                                DefinitionOptions(mappings={"f": {"type": "flattened"}}))["mappings"]
    assert mappings["dynamic_templates"] == [
        {"j_integers": {"path_match": "j.*", "match_mapping_type": "long", "mapping": {"type": "double"}}},
        {"j_fractions": {"path_match": "j.*", "match_mapping_type": "double", "mapping": {"type": "double"}}}]
