from derived.sinks.search.definition import DATE_FORMAT, differences, field_mapping
from pipelines.apply.stores import definition_for, document_definition_for, marker_definition, refresh_intervals
from pipelines.config import parse_config
from pipelines.ops.index_comparison import IndexComparison
from pipelines.ops.status import Report, _index_definitions
from pipelines.schema.actions import _field_mappings
from tests.support.configs import BASE, with_

TABLE = {"name": "public.t", "columns": ["id", "at", "doc", "amount", "name"], "rename": {"at": "created"},
         "numeric_as_number": ["amount"],
         "search": {"settings": {"refresh_interval": "5s"}, "json": "flattened", "mappings": {"name": {"type": "keyword"}}}}
TYPES = {"id": "bigint", "at": "timestamp with time zone", "doc": "jsonb", "amount": "numeric(12,2)", "name": "text",
         "hidden": "text"}


def cfg():
    data = with_("tables", [TABLE])
    data["search"] = {**BASE["search"], "index_settings": {"number_of_replicas": 0, "refresh_interval": "1s"},
                      "deleted_version_ttl_s": 7200}
    return parse_config(data)


def test_definition_from_config_and_catalog_types():
    c = cfg()
    d = definition_for(c, c.tables[0], TYPES)
    assert d == {"settings": {"index": {"number_of_replicas": 0, "refresh_interval": "5s", "gc_deletes": "7200s",
                                        "mapping": {"ignore_malformed": True}}},
                 "mappings": {"dynamic": True, "date_detection": False, "numeric_detection": False, "properties": {
                     "id": {"type": "long"}, "created": {"type": "date", "format": DATE_FORMAT, "ignore_malformed": True},
                     "doc": {"type": "flat_object"}, "amount": {"type": "scaled_float", "scaling_factor": 100, "ignore_malformed": True},
                     "name": {"type": "keyword"}}}}
    assert differences(d, d) == []
    assert marker_definition(c) == {"settings": {"index": {"number_of_replicas": 0, "refresh_interval": "1s",
                                                           "gc_deletes": "7200s"}}}


def test_a_mapping_extended_in_place_follows_the_table_options():
    c = cfg()
    assert _field_mappings({"created": "date", "amount": "numeric(12,2)", "name": "text", "p": "point"}, c,
                           "public.t") == {"created": {"type": "date", "format": DATE_FORMAT, "ignore_malformed": True},
                                           "amount": {"type": "scaled_float", "scaling_factor": 100, "ignore_malformed": True},
                                           "name": {"type": "keyword"}}  # "p" is outside the projection
    assert _field_mappings({"n": "integer"}) == {"n": {"type": "long"}}


def test_status_warns_while_the_live_index_differs_and_skips_when_it_cannot_compare():
    c = cfg()
    report = Report()
    _index_definitions(c, report, compare=lambda config: [
        IndexComparison("public.t", "t", "t_v1", {}, {}, ["settings index.refresh_interval: config 5s, live 1s"]),
        IndexComparison("public.u", "u", "u_v1", {}, {}, []),
        IndexComparison("public.v", "v", None, {}, None, ["no live index behind v"])])
    [warning] = report.warnings
    assert "public.t: index t_v1 differs" in warning and "cdckit rebuild search --table public.t" in warning
    assert report.healthy

    def down(config):
        raise ConnectionError("refused")

    report = Report()
    _index_definitions(c, report, compare=down)
    assert report.warnings == ["index definitions not compared: ConnectionError: refused"] and report.healthy


def test_a_documents_index_is_defined_from_its_tables_types_and_options():
    data = with_("tables", [{"name": "public.orders"}, {"name": "public.lines", "numeric_as_number": ["price"]}])
    data["documents"] = [{"name": "orders", "root": "public.orders", "relations": [
        {"label": "lines", "table": "public.lines", "type": "one_to_many", "columns": ["price", "at"]}]}]
    data["search"] = {**BASE["search"], "index_settings": {"number_of_replicas": 0}, "deleted_version_ttl_s": 60}
    c = parse_config(data)
    types = {"public.orders": {"id": "bigint", "meta": "jsonb"},
             "public.lines": {"id": "bigint", "order_id": "bigint", "price": "numeric(12,2)", "at": "date"}}
    d = document_definition_for(c, c.documents[0], types)
    assert d["settings"] == {"index": {"number_of_replicas": 0, "gc_deletes": "60s", "mapping": {"ignore_malformed": True}}}
    assert d["mappings"]["date_detection"] is False and d["mappings"]["numeric_detection"] is False
    assert d["mappings"]["properties"] == {
        "id": {"type": "long"}, "meta": field_mapping("jsonb", kind=c.search.kind),
        "lines": {"type": "object", "properties": {
            "price": {"type": "scaled_float", "scaling_factor": 100, "ignore_malformed": True},
            "at": {"type": "date", "format": DATE_FORMAT, "ignore_malformed": True}}}}


def test_every_index_the_job_writes_has_its_configured_refresh_interval():
    data = with_("tables", [{"name": "public.orders"}, {"name": "public.lines", "search": {"settings": {
        "refresh_interval": "30s"}}}, {"name": "public.notes", "search": {"settings": {"index": {"refresh_interval": "-1"}}}}])
    data["documents"] = [{"name": "orders", "root": "public.orders", "relations": [
        {"label": "lines", "table": "public.lines", "type": "one_to_many"}]}]
    c = parse_config(data)
    intervals = refresh_intervals(c)
    assert intervals[c.tables[0].index_name] is None and intervals[c.tables[1].index_name] == "30s"
    assert intervals[c.tables[2].index_name] == "-1" and intervals[c.documents[0].index_name] is None
    data["search"] = {**BASE["search"], "index_settings": {"refresh_interval": "500ms"}}
    c = parse_config(data)
    intervals = refresh_intervals(c)   # the tables' own settings over search.index_settings; documents take these
    assert intervals[c.tables[0].index_name] == "500ms" and intervals[c.tables[1].index_name] == "30s"
    assert intervals[c.documents[0].index_name] == "500ms"
