"""Index definitions (pure): the settings and mappings cdckit creates an index with, derived from the
table's column types (Postgres `format_type` spellings) and the config's options, and how a live
index differs from one.

The rule: no value Postgres accepts makes the engine refuse a document. A value a field cannot index
(an infinite date, a NaN double, a keyword beyond the term limit) is kept in `_source`, unindexed:
`ignore_malformed` on dates and numbers, `ignore_above` on every keyword, flattened JSON, explicit
mappings for Debezium's structs (geometric types), no date or numeric detection of strings (a
date-looking first value would refuse every later non-date), and `index.mapping.ignore_malformed`
on the index for what the fields do not say themselves (a JSON scalar in a flattened field). Each
was measured on OpenSearch 2.19.1 (docs/documents.md "Index definitions").

Every integer type maps to `long`: a column widened by ALTER COLUMN TYPE (smallint -> integer ->
bigint) keeps its mapping, and `long` doc values cost no more than `integer` ones in practice.
"""
from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Literal, Mapping

TextMode = Literal["text+keyword", "text", "keyword"]
JsonMode = Literal["object", "flattened"]
Dynamic = bool | Literal["strict"]

DATE_FORMAT = "strict_date_optional_time||epoch_millis"
# A keyword term longer than 32,766 bytes fails the whole document; 8,191 characters of up to 4
# bytes each stay below it (a longer value is kept in _source, just not indexed).
KEYWORD_IGNORE_ABOVE = 8191
# connectors/typed_values.JSON_DEPTH: deeper JSON is held as its text, so a flattened field's depth
# limit (Elasticsearch's default is 20) never refuses a value.
JSON_DEPTH_LIMIT = 101
# Settings of every index cdckit creates, beneath the config's own.
INDEX_DEFAULTS: dict[str, Any] = {"index.mapping.ignore_malformed": True}

_INTEGERS = {"smallint", "integer", "bigint", "int2", "int4", "int8", "oid", "xid", "smallserial", "serial",
             "bigserial"}
_FLOATS = {"real": "float", "float4": "float", "double precision": "double", "float8": "double"}
_DATES = {"date", "timestamp without time zone", "timestamp with time zone", "timestamp", "timestamptz"}
_KEYWORDS = {"time without time zone", "time with time zone", "time", "timetz", "interval", "uuid", "inet",
             "cidr", "macaddr", "macaddr8", "bit varying", "varbit", "pg_lsn", "txid_snapshot", "pg_snapshot"}
_RANGES = re.compile(r"^(int4|int8|num|ts|tstz|date)(multi)?range$")
_JSON = {"json", "jsonb", "hstore"}
_MODIFIERS = re.compile(r"\(([^)]*)\)")

KEYWORD: dict[str, Any] = {"type": "keyword", "ignore_above": KEYWORD_IGNORE_ABOVE}
# NaN and the infinities reach a float or double field as the strings Kafka's JsonConverter writes
# ("NaN", "Infinity", "-Infinity"): refused without ignore_malformed.
_DOUBLE = {"type": "double", "ignore_malformed": True}
# Debezium's structs for the geometric types (io.debezium.data.geometry): a point {x, y, wkb, srid},
# a circle {center: point, radius}, a line {a, b, c}, the others and PostGIS's {wkb, srid,
# extensions}. `dynamic: false`: a field Debezium adds later stays in _source.
_POINT = {"type": "object", "dynamic": False, "properties": {
    "x": _DOUBLE, "y": _DOUBLE, "wkb": {"type": "binary"}, "srid": {"type": "long"}}}
_SHAPE = {"type": "object", "dynamic": False, "properties": {"wkb": {"type": "binary"}, "srid": {"type": "long"}}}
_GEOMETRY: dict[str, dict[str, Any]] = {
    "point": _POINT,
    "circle": {"type": "object", "dynamic": False, "properties": {"center": _POINT, "radius": _DOUBLE}},
    "line": {"type": "object", "dynamic": False, "properties": {"a": _DOUBLE, "b": _DOUBLE, "c": _DOUBLE}},
    **{name: _SHAPE for name in ("lseg", "box", "path", "polygon", "geometry", "geography")},
}


@dataclass(frozen=True)
class DefinitionOptions:
    """What the config says about one table's index (pipelines/apply/stores.py fills it)."""

    columns: list[str] | None = None             # projection; None keeps every column
    rename: dict[str, str] = field(default_factory=dict)
    numeric_as_number: list[str] = field(default_factory=list)
    text: TextMode = "text+keyword"
    json: JsonMode = "flattened"
    dynamic: Dynamic = True
    kind: str = "elasticsearch"                 # or "opensearch": flattened is `flat_object` there
    settings: dict[str, Any] = field(default_factory=dict)   # index settings, any spelling (see flat_settings)
    mappings: dict[str, Any] = field(default_factory=dict)   # field -> mapping, over the derived ones
    gc_deletes_s: int | None = None


def split_type(pg_type: str) -> tuple[str, list[str], bool]:
    """(base name, modifiers, is an array): 'numeric(12,2)[]' -> ('numeric', ['12', '2'], True)."""
    t = pg_type.strip()
    array = t.endswith("]")
    t = re.sub(r"(\[\d*\])+$", "", t).strip()
    mods = [m.strip() for group in _MODIFIERS.findall(t) for m in group.split(",") if m.strip()]
    base = " ".join(_MODIFIERS.sub("", t).split()).lower()
    return base, mods, array


def field_mapping(pg_type: str, *, as_number: bool = False, text: TextMode = "text+keyword",
                  json: JsonMode = "flattened", kind: str = "elasticsearch") -> dict[str, Any]:
    """The mapping of a document field holding a column of this type (an array, of any dimension,
    maps as its element: search engines' fields are implicitly arrays and take nested ones flat).
    `as_number`: the column is in `numeric_as_number`."""
    base, mods, _ = split_type(pg_type)
    if base in _INTEGERS:
        return {"type": "long"}
    if base in _FLOATS:
        return {"type": _FLOATS[base], "ignore_malformed": True}
    if base in ("numeric", "decimal", "money"):
        return _number(base, mods) if as_number else dict(KEYWORD)   # numeric holds up to 131,072 digits
    if (base in ("boolean", "bool") or (base == "bit" and mods in ([], ["1"]))
            or (base in ("bit varying", "varbit") and mods == ["1"])):
        return {"type": "boolean"}  # bit(1) and bit varying(1): Debezium sends true/false
    if base in _DATES:
        # Debezium's and typed_values' renderings: years 0 and before as '-0043-03-15', beyond 9999 as
        # '+10000-01-01' (both indexed and found by range queries); 'infinity' and '-infinity' are
        # malformed: kept in _source, unindexed, instead of failing the whole document.
        return {"type": "date", "format": DATE_FORMAT, "ignore_malformed": True}
    if base in _KEYWORDS or base.startswith("interval ") or base in ("bit", "bit varying") or _RANGES.match(base):
        return dict(KEYWORD)  # bit(n) and bit varying: Debezium's bytes, base64
    if base in _JSON:
        return json_mapping(json, kind)
    if base == "bytea":
        return {"type": "binary"}
    if base in _GEOMETRY:
        return copy.deepcopy(_GEOMETRY[base])
    return _text(text)  # text, varchar, char, citext, xml, tsvector, enums, domains, anything unknown


def json_mapping(mode: JsonMode, kind: str) -> dict[str, Any]:
    """json, jsonb and hstore columns.

    `flattened` (the default): the whole value is one field, `flat_object` on OpenSearch,
    `flattened` on Elasticsearch; every leaf is indexed as a keyword under its dotted path. Nothing
    Postgres holds refuses it (measured on OpenSearch 2.19.1, docs/documents.md "Index definitions"): one path
    holding an object in one row and a string in another, numbers and strings in one array, arrays
    of arrays and of objects, empty objects and arrays, keys that are empty, dotted, numeric, unicode
    or whitespace, 120 levels deep, 1,500 distinct keys (the index counts one field), integers
    beyond 64 bits and numbers beyond a double. A scalar or an array of scalars as the whole value is
    malformed for it: kept in _source through `index.mapping.ignore_malformed`. A value no term can
    hold (a leaf beyond 32 KB with its path: refused, measured) or no document can carry (nesting
    beyond 100 levels; orjson writes 254) never reaches it: connectors/typed_values.py holds such a
    value as its JSON text, which the field takes as a malformed scalar.
    What a query can still do: a term (or terms, prefix, wildcard, match) on a path, `doc.a.b: 3`,
    matches the leaf's text (3 and "3" alike; 1.50 and 1.5 not); `doc: "x"` matches a leaf anywhere;
    range queries compare text (lexicographically: "10" < "5"); exists works on first-level keys
    only; no aggregations on sub-paths on OpenSearch.

    `object` (opt-in): each key a typed field of its own (numbers as double, see
    json_number_templates), with numeric ranges and aggregations per path, and every refusal that
    comes with it: a path whose type changes between rows or within an array, an object where a
    string was, empty or dot-only keys, more than 20 levels, more than 1,000 distinct paths per
    index. derived/sinks/search/sink.py names the table, field and path at the first one."""
    if mode == "object":
        return {"type": "object"}
    if kind == "opensearch":
        return {"type": "flat_object"}  # no parameters on OpenSearch 2.19 (ignore_above, depth_limit refused)
    return {"type": "flattened", "depth_limit": JSON_DEPTH_LIMIT, "ignore_above": KEYWORD_IGNORE_ABOVE}


def _number(base: str, mods: list[str]) -> dict[str, Any]:
    """A scale and a precision that fit a long after scaling (p <= 18): scaled_float, exact to the
    scale; otherwise a double (about 15-17 significant digits). ignore_malformed: NaN and the
    infinities stay strings (JSON has no such numbers) and are kept in _source, unsearchable."""
    if base == "money":
        return {"type": "scaled_float", "scaling_factor": 100, "ignore_malformed": True}
    if len(mods) == 2 and mods[0].isdigit() and mods[1].isdigit():
        precision, scale = int(mods[0]), int(mods[1])
        if 0 < scale and precision <= 18:
            return {"type": "scaled_float", "scaling_factor": 10 ** scale, "ignore_malformed": True}
    return {"type": "double", "ignore_malformed": True}


def _text(mode: TextMode) -> dict[str, Any]:
    if mode == "keyword":
        return dict(KEYWORD)
    if mode == "text":
        return {"type": "text"}
    return {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}}


def _is_json(pg_type: str) -> bool:
    return split_type(pg_type)[0] in _JSON


def field_mappings(types: Mapping[str, str], options: DefinitionOptions) -> dict[str, dict[str, Any]]:
    """Document field -> mapping for these columns (column -> type), after the projection and
    renames; the config's mappings replace the derived ones field by field."""
    props: dict[str, dict[str, Any]] = {}
    for column, pg_type in types.items():
        if options.columns is not None and column not in options.columns:
            continue
        name = options.rename.get(column, column)
        mapping = field_mapping(pg_type, as_number=column in options.numeric_as_number, text=options.text,
                                json=options.json, kind=options.kind)
        if mapping.get("type") == "object" and _is_json(pg_type) and options.dynamic == "strict":
            # JSON content is unknown by nature: under a strict index its keys are still mapped.
            mapping = {**mapping, "dynamic": True}
        props[name] = mapping
    return props


def index_definition(types: Mapping[str, str], options: DefinitionOptions) -> dict[str, Any]:
    """{"settings": {"index": {...}}, "mappings": {"dynamic": ..., "date_detection": false, ...}}."""
    props = field_mappings(types, options)
    props.update({name: dict(m) for name, m in options.mappings.items()})
    objects = [options.rename.get(c, c) for c, t in types.items()
               if (options.columns is None or c in options.columns) and _is_json(t)]
    templates = json_number_templates([f for f in objects if props.get(f, {}).get("type") == "object"])
    return {"settings": index_settings({**INDEX_DEFAULTS, **flat_settings(options.settings)}, options.gc_deletes_s),
            "mappings": _mappings(options.dynamic, props, templates)}


def _mappings(dynamic: Dynamic, props: dict[str, Any], templates: list[dict[str, Any]]) -> dict[str, Any]:
    # No detection: a string that looks like a date (or a number) would map its field as one, and
    # every later value that is not would be refused (dynamically mapped fields only: derived
    # fields are typed by their columns).
    mappings: dict[str, Any] = {"dynamic": dynamic, "date_detection": False, "numeric_detection": False,
                                "properties": props}
    if templates:
        mappings["dynamic_templates"] = templates
    return mappings


def document_definition(document, types: Mapping[str, Mapping[str, str]],
                        options: Mapping[str, DefinitionOptions], settings: Mapping[str, Any] | None = None,
                        gc_deletes_s: int | None = None) -> dict[str, Any]:
    """The index of a nested document (derived/nested.py): the root's columns mapped from their
    types by the rules above (each table's numeric_as_number, text and json options; the document's
    own renames, not the tables'), each relation an object of its rows' columns, nested the same way
    (a list of rows maps as one object: engines' fields are arrays), then the document's `mappings`
    by dotted field path over them. `document` is a DocumentSpec or the config's DocumentConfig (root,
    columns, rename, relations with label, table, through, columns, rename, value, relations);
    `types`: table -> column -> type."""
    json_objects: list[str] = []

    def fields(table: str, columns: Iterable[str] | None, relations, prefix: str, rename=()) -> dict[str, Any]:
        o = options.get(table) or DefinitionOptions()
        names = dict(rename or ())
        out: dict[str, Any] = {}
        for column in (list(columns) if columns is not None else list(types.get(table, {}))):
            pg_type = types.get(table, {}).get(column)
            if pg_type is None:
                continue
            name = names.get(column, column)
            out[name] = field_mapping(pg_type, as_number=column in o.numeric_as_number, text=o.text,
                                      json=o.json, kind=o.kind)
            if _is_json(pg_type) and out[name]["type"] == "object":
                json_objects.append(prefix + name)
        for rel in relations:
            rows = rel.through.table if rel.through is not None else rel.table
            value = getattr(rel, "value", None)
            if value is not None:   # a scalar relation: its values map as the column does, at the label
                out.update(fields(rows, [value], (), prefix, ((value, rel.label),)))   # (fields are arrays)
                continue
            out[rel.label] = {"type": "object", "properties": fields(rows, rel.columns, rel.relations,
                                                                     f"{prefix}{rel.label}.", getattr(rel, "rename", ()))}
        return out

    rename = getattr(document, "rename", ())
    props = fields(document.root, document.columns, document.relations, "",
                   rename.items() if isinstance(rename, dict) else rename)
    for path, mapping in (getattr(document, "mappings", None) or {}).items():
        _override(props, path.split("."), mapping)
    return {"settings": index_settings({**INDEX_DEFAULTS, **flat_settings(settings or {})}, gc_deletes_s),
            "mappings": _mappings(True, props, json_number_templates(json_objects))}


def _override(props: dict[str, Any], path: list[str], mapping: Mapping[str, Any]) -> None:
    """A configured mapping at a dotted path of a document's properties (an object's fields are under
    its `properties`), in place of the derived one."""
    for part in path[:-1]:
        props = props.setdefault(part, {"type": "object", "properties": {}}).setdefault("properties", {})
    props[path[-1]] = dict(mapping)


def json_number_templates(fields: list[str]) -> list[dict[str, Any]]:
    """Numbers inside JSON objects (json: object) map as double: JSON does not tell 1 from 1.0, and
    a field first seen as an integer (long), or as a fraction (float), refuses the other later.
    (Integers beyond 2^53 are then searched as the nearest double; _source keeps them exact.)"""
    return [{f"{name}_{what}": {"path_match": f"{name}.*", "match_mapping_type": seen, "mapping": {"type": "double"}}}
            for name in fields for what, seen in (("integers", "long"), ("fractions", "double"))]


def index_settings(settings: Mapping[str, Any], gc_deletes_s: int | None = None) -> dict[str, Any]:
    """Settings in the nested form engines answer with (`{"index": {...}}`), whatever spelling the
    config used ('refresh_interval', 'index.refresh_interval' or nested), with gc_deletes."""
    flat = flat_settings(settings)
    if gc_deletes_s:
        flat["index.gc_deletes"] = f"{gc_deletes_s}s"
    return _nest(flat)


def with_gc_deletes(definition: Mapping[str, Any] | None, gc_deletes_s: int | None) -> dict[str, Any]:
    """The definition with index.gc_deletes set, unless it sets one already."""
    out = dict(definition or {})
    flat = flat_settings(out.get("settings") or {})
    if gc_deletes_s and "index.gc_deletes" not in flat:
        flat["index.gc_deletes"] = f"{gc_deletes_s}s"
    if flat:
        out["settings"] = _nest(flat)
    return out


def flat_settings(settings: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted keys, each under 'index.' (as the engine stores them); lists are values."""
    out: dict[str, Any] = {}
    for key, value in settings.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flat_settings(value, f"{path}."))
        else:
            out[path if path.startswith("index.") else f"index.{path}"] = value
    return out


def _nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in sorted(flat.items()):
        *parents, leaf = key.split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


# --- comparison -------------------------------------------------------------------------------

def differences(wanted: Mapping[str, Any], live: Mapping[str, Any]) -> list[str]:
    """What the wanted definition asks for that the live index lacks or has otherwise, one line
    each. Tolerates what engines add or normalise: settings answered as strings under `index.`,
    defaults filled into mappings, fields mapped dynamically (not wanted: ignored)."""
    out: list[str] = []
    have = flat_settings(live.get("settings") or {})
    for key, value in flat_settings(wanted.get("settings") or {}).items():
        if key not in have:
            out.append(f"settings {key}: config {_show(value)}, live not set")
        elif not _same(value, have[key]):
            out.append(f"settings {key}: config {_show(value)}, live {_show(have[key])}")
    want_m, live_m = wanted.get("mappings") or {}, live.get("mappings") or {}
    for key, default in _MAPPING_DEFAULTS.items():
        if key in want_m and not _same(want_m[key], live_m.get(key, default)):
            out.append(f"mappings {key}: config {_show(want_m[key])}, live {_show(live_m.get(key, default))}")
    # A field's ignore_malformed equal to the index's is left out of some answers (a date's, on OpenSearch).
    index_default = {"ignore_malformed": have.get("index.mapping.ignore_malformed", False)}
    out.extend(_property_differences(want_m.get("properties") or {}, live_m.get("properties") or {},
                                     "mappings properties.", index_default))
    return out


def _property_differences(want: Mapping[str, Any], have: Mapping[str, Any], path: str,
                          index_default: Mapping[str, Any]) -> list[str]:
    out = []
    for name, mapping in want.items():
        if name not in have:
            out.append(f"{path}{name}: config {_show(mapping)}, live not mapped")
        else:
            out.extend(_mapping_differences(mapping, have[name], f"{path}{name}", index_default))
    return out


def _mapping_differences(want: Mapping[str, Any], have: Mapping[str, Any], path: str,
                         index_default: Mapping[str, Any]) -> list[str]:
    out = []
    for key, value in want.items():
        if key in ("properties", "fields") and isinstance(value, Mapping):
            out.extend(_property_differences(value, have.get(key) or {}, f"{path}.{key}.", index_default))
            continue
        got = have.get(key)
        if key == "type" and got is None and value == "object":
            continue  # engines leave out `"type": "object"`, the default of a field with properties
        if key not in have and (_is_default(want.get("type"), key, value)
                                or (key in index_default and _same(index_default[key], value))):
            continue  # engines leave out parameters at their default (a date's format, ...)
        if key not in have:
            out.append(f"{path}.{key}: config {_show(value)}, live not set")
        elif not _same(value, got):
            out.append(f"{path}.{key}: config {_show(value)}, live {_show(got)}")
    return out


# Top-level mapping parameters and the engines' defaults (answered only when set).
_MAPPING_DEFAULTS: dict[str, Any] = {"dynamic": True, "date_detection": True, "numeric_detection": False}
# Mapping parameters engines leave out of a mapping they answer when they hold the default.
_DEFAULTS: dict[str, Any] = {"index": True, "doc_values": True, "store": False}
_TYPE_DEFAULTS: dict[str, dict[str, Any]] = {"date": {"format": DATE_FORMAT}, "text": {"norms": True},
                                             "keyword": {"norms": False}}


def _is_default(type_: Any, key: str, value: Any) -> bool:
    defaults = {**_DEFAULTS, **_TYPE_DEFAULTS.get(str(type_ or "object"), {})}
    return key in defaults and _same(defaults[key], value)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        return (isinstance(a, Mapping) and isinstance(b, Mapping) and set(a) == set(b)
                and all(_same(a[k], b[k]) for k in a))
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        a_items = list(a) if isinstance(a, (list, tuple)) else [a]
        b_items = list(b) if isinstance(b, (list, tuple)) else [b]
        return len(a_items) == len(b_items) and all(_same(x, y) for x, y in zip(a_items, b_items))
    return _scalar(a) == _scalar(b)


def _scalar(v: Any) -> str:
    """Engines answer settings as strings ('0', 'true') and may write numbers as 100.0."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)) and float(v).is_integer():
        return str(int(v))
    if isinstance(v, str) and re.fullmatch(r"-?\d+\.0+", v):
        return v.split(".")[0]
    return str(v).lower() if isinstance(v, str) and v.lower() in ("true", "false") else str(v)


def _show(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str) if isinstance(v, (Mapping, list)) else str(_scalar(v))
