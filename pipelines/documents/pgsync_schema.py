"""A pgsync schema file (a list of databases, each an index built from a tree of `nodes`) as cdckit
config: each database's documents, the tables they read (captured without an index or keys of
their own), renames and mappings. Pure: what the database's constraints tell is asked of a
catalog (pipelines/documents/document_specs.Catalog, or a stand-in).

How pgsync's terms read in cdckit's (docs/coming-from-pgsync.md):
- a node's children: relations, labelled by `label` (default: the table's name);
- `one_to_one`: many_to_one (one object, or null), whichever table holds the foreign key;
- `one_to_many`: one_to_many; with `through_tables: [link]`: many_to_many, `table:` the child's table
  and `link:` the link table (the order a pgsync user reads it in);
- `variant: scalar`: a relation of the one column's values (`value:`);
- pgsync shows a list without rows as null: `null_when_empty: true`;
- `foreign_key: {child: [...], parent: [...]}`: the join; without it, the one foreign key between
  the two tables in the catalog (as pgsync does);
- `transform.rename` / `transform.mapping`, the database's `mapping` (field -> mapping) and
  `setting` (index settings): rename, mappings, search.index_settings.
What has no equivalent (concat, replace, move, plugins, routing, pipeline, whole `mappings`, JSON
operators in `columns`, base_tables) is refused, each by file, node path and key: never dropped.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

DEFAULT_SCHEMA = "public"
NODE_KEYS = {"table", "schema", "columns", "label", "children", "relationship", "transform", "primary_key",
             "base_tables"}
RELATIONSHIP_KEYS = {"type", "variant", "foreign_key", "through_tables"}
TRANSFORMS = {"rename", "mapping"}
DATABASE_KEYS = {"database", "index", "nodes", "setting", "mapping", "mappings", "plugins", "routing", "pipeline"}
WHY = {
    "concat": "cdckit documents compute no fields from others (a table's transform.fields does, for its own index)",
    "replace": "cdckit documents keep values as Postgres has them",
    "move": "cdckit documents keep each field under its relation",
    "plugins": "pgsync plugins are Python run per document; cdckit's hook runs per table row (tables.N.transform.hook)",
    "routing": "cdckit writes with the engine's default routing",
    "pipeline": "cdckit sends no ingest pipeline",
    "mappings": "cdckit derives the mapping from the column types; override fields with `mapping` instead",
    "base_tables": "cdckit captures every table a document reads by itself",
}
JSON_OPERATORS = ("->", "->>", "#>", "#>>")


class ForeignKeys(Protocol):
    def foreign_keys(self, table: str, references: str) -> list[dict[str, str]]: ...


@dataclass
class Conversion:
    """One cdckit config section per Postgres database: {database: {"tables": [...], "documents": [...],
    "search": {...}}}, and what could not be converted (path, why)."""
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    refused: list[tuple[str, str]] = field(default_factory=list)


def convert(schema: Any, catalog: ForeignKeys | None = None, source: str = "schema.json") -> Conversion:
    out = Conversion()
    if not isinstance(schema, list):
        out.refused.append((f"{source}", "a pgsync schema is a list of databases"))
        return out
    for i, entry in enumerate(schema):
        where = f"{source}: [{i}]"
        if not isinstance(entry, dict) or "database" not in entry or "nodes" not in entry:
            out.refused.append((where, "each entry needs 'database' and 'nodes'"))
            continue
        _database(entry, where, catalog, out)
    return out


def _database(entry: dict, where: str, catalog: ForeignKeys | None, out: Conversion) -> None:
    for key in sorted(set(entry) - DATABASE_KEYS):
        out.refused.append((f"{where}.{key}", "not a key of a pgsync schema"))
    for key in ("plugins", "routing", "pipeline", "mappings"):
        if entry.get(key):
            out.refused.append((f"{where}.{key}", f"no equivalent: {WHY[key]}"))
    index = str(entry.get("index") or entry["database"])
    config = out.configs.setdefault(entry["database"], {"tables": [], "documents": []})
    doc: dict[str, Any] = {"name": index, "index": index, "null_when_empty": True}
    mappings: dict[str, Any] = dict(entry.get("mapping") or {})
    if entry.get("setting"):
        config.setdefault("search", {}).setdefault("index_settings", {}).update(entry["setting"])
    nodes = entry["nodes"]
    if not isinstance(nodes, dict) or "table" not in nodes:
        out.refused.append((f"{where}.nodes", "a node needs 'table'"))
        return
    root = _qualified(nodes)
    doc["root"] = root
    _node_common(nodes, f"{where}.nodes", doc, mappings, "", config, out)
    relations = [_child(child, nodes, f"{where}.nodes.children[{k}]", mappings, "", config, catalog, out)
                 for k, child in enumerate(nodes.get("children") or [])]
    doc["relations"] = [r for r in relations if r is not None]
    if not doc["relations"]:
        # A root alone is a flat table in cdckit: its own index, no document.
        out.refused.append((f"{where}.nodes", "a root without children is a flat table in cdckit: list it under "
                                              "'tables' with index: " + index))
        return
    if mappings:
        doc["mappings"] = mappings
    config["documents"].append(doc)


def _node_common(node: dict, where: str, target: dict, mappings: dict, prefix: str, config: dict,
                 out: Conversion) -> None:
    """columns, primary_key, transform of a node, into the document or relation `target`."""
    for key in sorted(set(node) - NODE_KEYS):
        out.refused.append((f"{where}.{key}", "not a key of a pgsync node"))
    if node.get("base_tables"):
        out.refused.append((f"{where}.base_tables", f"no equivalent: {WHY['base_tables']}"))
    columns = node.get("columns") or []
    for c, column in enumerate(columns):
        if not isinstance(column, str) or any(op in column for op in JSON_OPERATORS):
            out.refused.append((f"{where}.columns[{c}]", f"{column!r}: JSON operators in columns have no equivalent "
                                                          "(a jsonb column is kept whole)"))
    if columns:
        target["columns"] = [c for c in columns if isinstance(c, str)]
    entry = _captured(config, _qualified(node))
    if node.get("primary_key"):
        entry["key"] = list(node["primary_key"])
    transform = node.get("transform") or {}
    for key in sorted(set(transform) - TRANSFORMS):
        why = WHY.get(key, "not a pgsync transform")
        out.refused.append((f"{where}.transform.{key}", f"no equivalent: {why}"))
    rename = transform.get("rename") or {}
    if rename:
        target["rename"] = {str(k): str(v) for k, v in rename.items()}
    for name, mapping in (transform.get("mapping") or {}).items():
        mappings[f"{prefix}{name}"] = mapping


def _child(node: dict, parent: dict, where: str, mappings: dict, prefix: str, config: dict,
           catalog: ForeignKeys | None, out: Conversion) -> dict[str, Any] | None:
    if "table" not in node:
        out.refused.append((where, "a node needs 'table'"))
        return None
    rel = node.get("relationship") or {}
    for key in sorted(set(rel) - RELATIONSHIP_KEYS):
        out.refused.append((f"{where}.relationship.{key}", "not a key of a pgsync relationship"))
    kind, variant = str(rel.get("type", "")).lower(), str(rel.get("variant", "")).lower()
    if kind not in ("one_to_one", "one_to_many") or variant not in ("object", "scalar"):
        out.refused.append((f"{where}.relationship", "needs type one_to_one|one_to_many and variant object|scalar"))
        return None
    label = str(node.get("label") or node["table"])
    table, parent_table = _qualified(node), _qualified(parent)
    through = rel.get("through_tables") or []
    relation: dict[str, Any] = {"label": label}
    if through:
        if len(through) != 1 or kind != "one_to_many":
            out.refused.append((f"{where}.relationship.through_tables",
                                "one link table, with type one_to_many (a list through it), is what cdckit reads"))
            return None
        if rel.get("foreign_key"):
            out.refused.append((f"{where}.relationship.foreign_key", "with through_tables the joins are the link "
                                "table's foreign keys to both tables: leave foreign_key out"))
        link = through[0] if "." in str(through[0]) else f"{node.get('schema', DEFAULT_SCHEMA)}.{through[0]}"
        relation.update({"table": table, "type": "many_to_many", "link": {"table": link}})
        if catalog is not None:
            to_parent = _one_key(catalog, link, parent_table, f"{where}.relationship.through_tables", out)
            to_far = _one_key(catalog, link, table, f"{where}.relationship.through_tables", out)
            if to_parent:
                relation["link"]["join"] = to_parent
            if to_far:
                relation["link"]["to"] = to_far
        _captured(config, link)
    else:
        relation.update({"table": table, "type": "many_to_one" if kind == "one_to_one" else "one_to_many"})
        join = _join(rel.get("foreign_key"), kind, table, parent_table, catalog, f"{where}.relationship", out)
        if join:
            relation["join"] = join
    _node_common(node, where, relation, mappings, f"{prefix}{label}.", config, out)
    if variant == "scalar":
        columns = relation.pop("columns", None)
        if not columns or len(columns) != 1:
            out.refused.append((f"{where}.columns", "a scalar variant holds one column's values: name exactly one"))
            return None
        if relation.get("rename"):
            out.refused.append((f"{where}.transform.rename", "a scalar variant's values carry no field name"))
            relation.pop("rename")
        if node.get("children"):
            out.refused.append((f"{where}.children", "a scalar variant holds values: it nests nothing"))
            return None
        relation["value"] = columns[0]
        # pgsync's mapping of a scalar is the label's own
        for name in [m for m in mappings if m.startswith(f"{prefix}{label}.")]:
            mappings[f"{prefix}{label}"] = mappings.pop(name)
    nested = [_child(c, node, f"{where}.children[{k}]", mappings, f"{prefix}{label}.", config, catalog, out)
              for k, c in enumerate(node.get("children") or [])]
    if nested:
        relation["relations"] = [r for r in nested if r is not None]
    return relation


def _join(fk: dict | None, kind: str, table: str, parent: str, catalog: ForeignKeys | None, where: str,
          out: Conversion) -> dict[str, str] | None:
    """cdckit's join: one_to_many {child column: parent column}; many_to_one {parent column: child column}."""
    if fk:
        child, parent_cols = fk.get("child") or [], fk.get("parent") or []
        if not child or len(child) != len(parent_cols):
            out.refused.append((f"{where}.foreign_key", "child and parent name as many columns each"))
            return None
        pairs = list(zip(child, parent_cols))
    elif catalog is None:
        return None   # cdckit takes the one foreign key between them at start (a mistake then names the field)
    else:
        up = catalog.foreign_keys(table, parent)      # the child holds the reference
        down = catalog.foreign_keys(parent, table)    # the parent does
        found = [list(k.items()) for k in up] + [[(c, p) for p, c in k.items()] for k in down]
        if len(found) != 1:
            what = "no foreign key" if not found else f"{len(found)} foreign keys"
            out.refused.append((f"{where}.foreign_key", f"{what} between {table} and {parent} in the catalog: "
                                                        "name the columns in foreign_key"))
            return None
        pairs = found[0]
    if kind == "one_to_one":
        return {p: c for c, p in pairs}
    return {c: p for c, p in pairs}


def _one_key(catalog: ForeignKeys, table: str, references: str, where: str, out: Conversion) -> dict[str, str] | None:
    found = catalog.foreign_keys(table, references)
    if len(found) != 1:
        what = "no foreign key" if not found else f"{len(found)} foreign keys"
        out.refused.append((where, f"{what} from {table} to {references} in the catalog"))
        return None
    return dict(found[0])


def _captured(config: dict, table: str) -> dict[str, Any]:
    """The table's entry in `tables:` (captured for the documents, no store of its own), added once."""
    entry = next((t for t in config["tables"] if t["name"] == table), None)
    if entry is None:
        entry = {"name": table, "documents_only": True}
        config["tables"].append(entry)
    return entry


def _qualified(node: dict) -> str:
    return f"{node.get('schema') or DEFAULT_SCHEMA}.{node['table']}"
