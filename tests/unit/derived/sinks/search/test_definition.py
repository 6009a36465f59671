import pytest

from derived.sinks.search.definition import (DATE_FORMAT, DefinitionOptions, differences, document_definition,
                                             field_mapping, index_definition, index_settings, split_type,
                                             with_gc_deletes)

TEXT = {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}}
DATE = {"type": "date", "format": DATE_FORMAT, "ignore_malformed": True}
KW = {"type": "keyword", "ignore_above": 8191}
FLAT = {"type": "flattened", "depth_limit": 101, "ignore_above": 8191}
DOUBLE = {"type": "double", "ignore_malformed": True}
POINT = {"type": "object", "dynamic": False, "properties": {"x": DOUBLE, "y": DOUBLE, "wkb": {"type": "binary"},
                                                            "srid": {"type": "long"}}}
SHAPE = {"type": "object", "dynamic": False, "properties": {"wkb": {"type": "binary"}, "srid": {"type": "long"}}}
NO_DETECTION = {"date_detection": False, "numeric_detection": False}


@pytest.mark.parametrize("pg_type,mapping", [
    ("integer", {"type": "long"}), ("bigint", {"type": "long"}), ("smallint", {"type": "long"}),
    ("oid", {"type": "long"}),
    ("real", {"type": "float", "ignore_malformed": True}), ("double precision", DOUBLE),   # "NaN", "Infinity"
    ("numeric(12,2)", KW), ("numeric", KW), ("money", KW),
    ("boolean", {"type": "boolean"}), ("bit(1)", {"type": "boolean"}), ("bit varying(1)", {"type": "boolean"}),
    ("bit varying(8)", KW), ("bit(8)", KW), ("bit varying", KW), ("bitmask", TEXT),
    ("text", TEXT), ("character varying(40)", TEXT), ("character(3)", TEXT), ("xml", TEXT), ("tsvector", TEXT),
    ("mood", TEXT), ('"MixedCase"', TEXT), ("citext", TEXT),
    ("date", DATE), ("timestamp without time zone", DATE), ("timestamp(3) without time zone", DATE),
    ("timestamp with time zone", DATE), ("time without time zone", KW),
    ("time(3) with time zone", KW), ("interval", KW), ("interval second(3)", KW),
    ("json", FLAT), ("jsonb", FLAT), ("hstore", FLAT),
    ("uuid", KW), ("inet", KW), ("cidr", KW), ("macaddr", KW), ("macaddr8", KW), ("pg_lsn", KW),
    ("int4range", KW), ("tstzrange", KW), ("datemultirange", KW),
    ("bytea", {"type": "binary"}),
    ("point", POINT), ("box", SHAPE), ("lseg", SHAPE), ("path", SHAPE), ("polygon", SHAPE), ("geometry", SHAPE),
    ("geometry(Point,4326)", SHAPE),
    ("circle", {"type": "object", "dynamic": False, "properties": {"center": POINT, "radius": DOUBLE}}),
    ("line", {"type": "object", "dynamic": False, "properties": {"a": DOUBLE, "b": DOUBLE, "c": DOUBLE}}),
    ("integer[]", {"type": "long"}), ("timestamp with time zone[]", DATE), ("text[]", TEXT),
    ("integer[][]", {"type": "long"}), ("box[]", SHAPE),
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
    assert field_mapping("jsonb", json="flattened") == FLAT
    assert field_mapping("jsonb", json="flattened", kind="opensearch") == {"type": "flat_object"}
    assert field_mapping("jsonb", json="object") == {"type": "object"}
    assert field_mapping("uuid", text="text") == KW  # not a text column


def test_every_keyword_the_definition_makes_stops_below_the_term_limit():
    """A term beyond 32,766 bytes fails the whole document (measured): every keyword, wherever it
    comes from, has ignore_above (8,191 characters of up to 4 bytes)."""
    types = ["text", "numeric", "money", "numeric(1000,500)", "uuid", "inet", "interval", "bit varying",
             "bit(64)", "int8range", "nummultirange", "time", "pg_lsn", "txid_snapshot", "character varying(9)",
             "xml", "tsvector", "mood", "citext"]

    def keywords(mapping):
        if mapping.get("type") == "keyword":
            yield mapping
        for sub in (mapping.get("fields") or {}).values():
            yield from keywords(sub)
        for sub in (mapping.get("properties") or {}).values():
            yield from keywords(sub)

    for pg_type in types:
        for text in ("text+keyword", "text", "keyword"):
            for kw in keywords(field_mapping(pg_type, text=text)):
                assert 0 < kw["ignore_above"] <= 8191, (pg_type, text)


def test_no_geometric_or_unknown_type_is_left_to_dynamic_mapping():
    for pg_type in ("point", "line", "lseg", "box", "path", "polygon", "circle", "geography", "my_composite",
                    "ltree", "vector(3)", "tsquery", "regclass", "\"char\"", "name"):
        assert field_mapping(pg_type) is not None


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
    assert d["settings"] == {"index": {"number_of_shards": 2, "refresh_interval": "5s", "gc_deletes": "3600s",
                                       "mapping": {"ignore_malformed": True}}}
    assert d["mappings"] == {"dynamic": False, **NO_DETECTION, "properties": {
        "id": {"type": "long"}, "amount": KW,
        "price": {"type": "scaled_float", "scaling_factor": 1000, "ignore_malformed": True}, "birthday": DATE, "doc": {"type": "object"},
        "email": {"type": "keyword"}, "extra": {"type": "long"}, "at": POINT},
        "dynamic_templates": [
            {"doc_integers": {"path_match": "doc.*", "match_mapping_type": "long", "mapping": {"type": "double"}}},
            {"doc_fractions": {"path_match": "doc.*", "match_mapping_type": "double", "mapping": {"type": "double"}}}]}


def test_strict_index_still_maps_json_content():
    d = index_definition({"doc": "jsonb", "at": "point"}, DefinitionOptions(dynamic="strict", json="object"))
    assert d["mappings"]["properties"]["doc"] == {"type": "object", "dynamic": True}
    assert d["mappings"]["properties"]["at"] == POINT  # Debezium's struct: its own fields only
    assert index_definition({"doc": "jsonb"}, DefinitionOptions(dynamic="strict"))["mappings"]["properties"] == {
        "doc": FLAT}


def test_the_index_takes_malformed_values_unless_the_config_says_otherwise():
    assert index_definition({}, DefinitionOptions())["settings"] == {"index": {"mapping": {"ignore_malformed": True}}}
    off = DefinitionOptions(settings={"mapping": {"ignore_malformed": False}})
    assert index_definition({}, off)["settings"] == {"index": {"mapping": {"ignore_malformed": False}}}


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
                           "mapping": {"ignore_malformed": "true"},
                           "number_of_shards": "1", "uuid": "x", "provided_name": "t_v1",
                           "creation_date": "1700000000000", "version": {"created": "136387927"}}},
    "mappings": {"date_detection": False, "properties": {
        "id": {"type": "long"}, "at": {"type": "date", "ignore_malformed": True},  # without the default format
        "doc": {"type": "flattened", "depth_limit": 101, "ignore_above": 8191},
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
    # (the live mappings here lack date_detection: an index created before cdckit turned it off)
    assert differences(WANTED, live) == [
        "settings index.gc_deletes: config 86400s, live not set",
        "settings index.refresh_interval: config 1s, live 30s",
        "mappings dynamic: config true, live strict",
        "mappings date_detection: config false, live true",
        "mappings properties.at.type: config date, live keyword",   # (ignore_malformed: the index's)
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
                                DefinitionOptions(json="object", mappings={"f": {"type": "flattened"}}))["mappings"]
    assert mappings["dynamic_templates"] == [
        {"j_integers": {"path_match": "j.*", "match_mapping_type": "long", "mapping": {"type": "double"}}},
        {"j_fractions": {"path_match": "j.*", "match_mapping_type": "double", "mapping": {"type": "double"}}}]


def test_a_document_index_maps_each_table_by_its_column_types():
    from derived.nested import DocumentSpec, Relation, Through

    spec = DocumentSpec("orders", "public.orders", ("id", "placed", "meta"), (
        Relation("lines", "public.lines", "one_to_many", (("order_id", "id"),), ("sku", "qty", "price"), "sku",
                 relations=(Relation("product", "public.products", "many_to_one", (("sku", "sku"),)),)),
        Relation("tags", "public.order_tags", "many_to_many", (("order_id", "id"),), ("name",),
                 through=Through("public.tags", (("tag_id", "id"),))),
    ))
    types = {"public.orders": {"id": "bigint", "placed": "timestamp with time zone", "meta": "jsonb", "note": "text"},
             "public.lines": {"order_id": "bigint", "sku": "text", "qty": "integer", "price": "numeric(12,2)"},
             "public.products": {"sku": "text", "at": "point", "doc": "jsonb"},
             "public.order_tags": {"order_id": "bigint", "tag_id": "bigint"},
             "public.tags": {"id": "bigint", "name": "character varying(20)"}}
    options = {"public.lines": DefinitionOptions(numeric_as_number=["price"], text="keyword", kind="opensearch"),
               "public.products": DefinitionOptions(json="object")}
    d = document_definition(spec, types, options, {"number_of_replicas": 0}, 600)
    assert d["settings"] == {"index": {"number_of_replicas": 0, "gc_deletes": "600s",
                                       "mapping": {"ignore_malformed": True}}}
    assert d["mappings"] == {"dynamic": True, **NO_DETECTION, "properties": {
        "id": {"type": "long"}, "placed": DATE, "meta": FLAT,
        "lines": {"type": "object", "properties": {
            "sku": KW, "qty": {"type": "long"},
            "price": {"type": "scaled_float", "scaling_factor": 100, "ignore_malformed": True},
            "product": {"type": "object", "properties": {"sku": TEXT, "at": POINT, "doc": {"type": "object"}}}}},
        "tags": {"type": "object", "properties": {"name": TEXT}}},
        "dynamic_templates": [
            {"lines.product.doc_integers": {"path_match": "lines.product.doc.*", "match_mapping_type": "long",
                                            "mapping": {"type": "double"}}},
            {"lines.product.doc_fractions": {"path_match": "lines.product.doc.*", "match_mapping_type": "double",
                                             "mapping": {"type": "double"}}}]}
    assert differences(d, d) == []


def test_a_scalar_relation_maps_as_its_column_does():
    """A list of one column's values (`value`): engines' fields are arrays, so the label maps as the
    column; a json column's numbers are templated at the label itself."""
    from derived.nested import DocumentSpec, Relation, Through

    spec = DocumentSpec("users", "public.users", ("id",), (
        Relation("tags", "public.user_tags", "many_to_many", (("user_id", "id"),), value="name",
                 through=Through("public.tags", (("tag_id", "id"),))),
        Relation("posts", "public.posts", "one_to_many", (("user_id", "id"),), value="meta"),
    ))
    types = {"public.users": {"id": "bigint"}, "public.user_tags": {"user_id": "bigint", "tag_id": "bigint"},
             "public.tags": {"id": "bigint", "name": "text"}, "public.posts": {"user_id": "bigint", "meta": "jsonb"}}
    d = document_definition(spec, types, {"public.posts": DefinitionOptions(json="object")})
    assert d["mappings"]["properties"] == {"id": {"type": "long"}, "tags": TEXT, "posts": {"type": "object"}}
    assert [list(t)[0] for t in d["mappings"]["dynamic_templates"]] == ["posts_integers", "posts_fractions"]
    assert d["mappings"]["dynamic_templates"][0]["posts_integers"]["path_match"] == "posts.*"


def test_a_fields_ignore_malformed_left_out_because_the_index_says_it():
    """OpenSearch 2.19 answers a date created with ignore_malformed under index.mapping.ignore_malformed
    without it (measured): the same as the index's is no difference, otherwise it is."""
    wanted = index_definition({"d": "date"}, DefinitionOptions())
    live = {"settings": {"index": {"mapping": {"ignore_malformed": "true"}}},
            "mappings": {"date_detection": False, "properties": {"d": {"type": "date"}}}}
    assert differences(wanted, live) == []
    live["settings"] = {}
    assert differences(wanted, live) == ["settings index.mapping.ignore_malformed: config true, live not set",
                                         "mappings properties.d.ignore_malformed: config true, live not set"]


def test_a_document_maps_renamed_fields_and_takes_configured_mappings_by_path():
    from derived.nested import DocumentSpec, Relation

    spec = DocumentSpec("users", "public.users", ("id", "name"), (
        Relation("posts", "public.posts", "one_to_many", (("user_id", "id"),), ("title", "body"),
                 rename=(("body", "text"),)),), rename=(("name", "full_name"),))
    types = {"public.users": {"id": "bigint", "name": "text"}, "public.posts": {"title": "text", "body": "text"}}

    class Doc:   # the config's shape: rename as a mapping, mappings by dotted path
        root, columns, relations = spec.root, spec.columns, spec.relations
        rename = {"name": "full_name"}
        mappings = {"posts.title": {"type": "keyword"}, "full_name": {"type": "keyword", "ignore_above": 256}}

    props = document_definition(Doc, types, {})["mappings"]["properties"]
    assert props["full_name"] == {"type": "keyword", "ignore_above": 256} and "name" not in props
    assert props["posts"]["properties"] == {"title": {"type": "keyword"}, "text": TEXT}
