"""`cdckit verify` for nested documents: each document built in Postgres by one generated SQL
statement (joins and `json_agg`, nothing of the pipeline's state model), compared field by field
with the search index and the cache, exactly.

The SQL carries every value as text; each is read back with psycopg's loader for its column's type
and rendered as the flat verify renders a row (Debezium's rendering, then the pipeline's typing),
so a document's leaves are compared by the same rules as a table's fields. Lists are ordered by
the model's rule (order_by, then key, in the typed values), which the SQL leaves to Python: text
collation in Postgres is not the documents' order."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterator

import orjson

from connectors import postgres
from connectors.debezium_values import same
from connectors.envelope import document_id
from connectors.typed_values import row_converter
from derived.nested import META, DocumentSpec, Relation, meta_field, sortable
from derived.sinks.cache.keys import render_key
from pipelines.documents.document_specs import Catalog, ResolvedDocuments, resolve_documents
from pipelines.config import Config
from pipelines.document_config import DocumentConfig
from pipelines.ops.verify_report import BATCH, StoreDiff, TableReport, chunks
from pipelines.ops.verify_values import ColumnReader, rendered

PAIRS = 40  # json_build_object takes at most 100 arguments: longer objects are joined from parts
KEY, ORDER, LINK = "__cdckit_key", "__cdckit_order", "__cdckit_link"


def document_sql(spec: DocumentSpec, resolved: ResolvedDocuments) -> str:
    """One row per root: the document as JSON text, every leaf a text value, plus the key and
    order values each list entry is sorted by."""
    root_obj = _object("r0", spec.root, spec.columns, spec.relations, resolved, 0, order_by=None)
    return f"SELECT ({root_obj})::text FROM {spec.root} r0"


def _object(alias: str, table: str, columns, relations, resolved: ResolvedDocuments, depth: int,
            order_by: str | None, link: tuple[str, str] | None = None) -> str:
    """`link`: (alias, table) of the link row a many_to_many entry came through (its key is kept
    for `_meta`)."""
    cols = list(columns) if columns is not None else list(resolved.types[table])
    pairs = [f"'{c}', {alias}.\"{c}\"::text" for c in cols]
    key_values = ", ".join(f'{alias}."{k}"::text' for k in resolved.keys[table])
    pairs.append(f"'{KEY}', json_build_array({key_values})")
    if link is not None:
        link_values = ", ".join(f'{link[0]}."{k}"::text' for k in resolved.keys[link[1]])
        pairs.append(f"'{LINK}', json_build_array({link_values})")
    if order_by is not None:
        pairs.append(f"'{ORDER}', {alias}.\"{order_by}\"::text")
    pairs += [f"'{rel.label}', ({_relation_sql(rel, alias, resolved, depth + 1)})" for rel in relations]
    parts = [f"jsonb_build_object({', '.join(pairs[i:i + PAIRS])})" for i in range(0, len(pairs), PAIRS)]
    return " || ".join(parts)


def _relation_sql(rel: Relation, parent: str, resolved: ResolvedDocuments, depth: int) -> str:
    a = f"r{depth}"
    if rel.value is not None:   # a scalar relation: its rows with the one column (mapped to values below)
        rel = replace(rel, columns=_shown_columns(rel))
    if rel.kind == "many_to_one":
        on = " AND ".join(f'{a}."{there}" = {parent}."{here}"' for here, there in rel.join)
        keys = ", ".join(f'{a}."{k}"' for k in resolved.keys[rel.table])
        obj = _object(a, rel.table, rel.columns, rel.relations, resolved, depth, None)
        # The model takes the lowest key when several rows match; the order is Python's, below.
        return f"SELECT jsonb_agg({obj} ORDER BY {keys}) FROM {rel.table} {a} WHERE {on}"
    on = " AND ".join(f'{a}."{here}" = {parent}."{there}"' for here, there in rel.join)
    if rel.kind == "one_to_many":
        obj = _object(a, rel.table, rel.columns, rel.relations, resolved, depth, rel.order_by)
        return f"SELECT coalesce(jsonb_agg({obj}), '[]'::jsonb) FROM {rel.table} {a} WHERE {on}"
    assert rel.through is not None
    f = f"f{depth}"
    far_on = " AND ".join(f'{f}."{there}" = {a}."{here}"' for here, there in rel.through.join)
    obj = _object(f, rel.through.table, rel.columns, rel.relations, resolved, depth, rel.order_by, (a, rel.table))
    return (f"SELECT coalesce(jsonb_agg({obj}), '[]'::jsonb) FROM {rel.table} {a} "
            f"JOIN {rel.through.table} {f} ON {far_on} WHERE {on}")


class _Reader:
    """Text values back to the pipeline's typed values, per table (pipelines/ops/verify_values.py:
    loaders by column type that never raise; types Debezium leaves out read as absent)."""

    def __init__(self, conn, config: Config, resolved: ResolvedDocuments):
        postgres.load_as_debezium(conn)
        numbers = {t.name: frozenset(t.numeric_as_number) for t in config.tables}
        self.types = resolved.types
        self.typed = {t: row_converter(cols, numbers.get(t, frozenset())) for t, cols in resolved.types.items()}
        self.columns = {table: ColumnReader(conn, table) for table in resolved.types}

    def row(self, table: str, values: dict[str, Any]) -> dict[str, Any]:
        types, reader = self.types[table], self.columns[table]
        loaded = {c: reader.load(c, v) for c, v in values.items()}
        return self.typed[table]({c: rendered(v, types.get(c, "")) for c, v in loaded.items()})


def build(raw: dict[str, Any], table: str, columns, relations, reader: _Reader, keys, rename=(),
          seen: dict[str, set] | None = None) -> tuple[dict, tuple]:
    """The typed document of one SQL object, and its sort key (order value, key values). `seen`
    (for `_meta`) gathers the keys of the rows it is built from, per table."""
    leaf_names = list(columns) if columns is not None else list(reader.types[table])
    typed = reader.row(table, {c: raw.get(c) for c in leaf_names})
    order = raw.get(ORDER)
    names = dict(rename)
    doc = {names.get(c, c): typed.get(c) for c in leaf_names}
    for rel in relations:
        doc[rel.label] = _nested(raw.get(rel.label), rel, reader, keys, seen)
    key_typed = reader.row(table, dict(zip(keys[table], raw[KEY])))
    key = tuple(key_typed[k] for k in keys[table])
    if seen is not None:
        seen.setdefault(table, set()).add(key)
    return doc, (order, key)


def _link_key(raw: dict[str, Any], rel: Relation, reader: _Reader, keys) -> tuple:
    typed = reader.row(rel.table, dict(zip(keys[rel.table], raw[LINK])))
    return tuple(typed[k] for k in keys[rel.table])


def _shown_columns(rel: Relation):
    """The columns a relation's rows are read with: a scalar relation's one column, or its columns."""
    return (rel.value,) if rel.value is not None else rel.columns


def _nested(raw, rel: Relation, reader: _Reader, keys, seen: dict[str, set] | None = None):
    table = rel.through.table if rel.through is not None else rel.table
    columns = _shown_columns(rel)
    shown = (lambda doc: doc[rel.value]) if rel.value is not None else (lambda doc: doc)
    if rel.kind == "many_to_one":
        if not raw:
            return None
        # The model shows the lowest key's row: only that row's keys are the document's.
        candidates = []
        for r in raw:
            own: dict[str, set] | None = {} if seen is not None else None
            candidates.append((build(r, table, columns, rel.relations, reader, keys, rel.rename, own), own))
        (doc, _), own = min(candidates, key=lambda c: sortable(c[0][1][1]))
        for t, found in (own or {}).items():
            seen.setdefault(t, set()).update(found)
        return shown(doc)
    built = []
    for r in raw or []:
        if seen is not None and rel.through is not None:
            seen.setdefault(rel.table, set()).add(_link_key(r, rel, reader, keys))
        doc, (order, key) = build(r, table, columns, rel.relations, reader, keys, rel.rename, seen)
        order_typed = reader.row(table, {rel.order_by: order}).get(rel.order_by) if rel.order_by else None
        built.append((doc, order_typed, key))
    built.sort(key=lambda b: ((sortable((b[1],)) if rel.order_by else ()), sortable(b[2])))
    if rel.empty_null and not built:
        return None
    return [shown(b[0]) for b in built]


def expected_documents(config: Config, doc: DocumentConfig, resolved: ResolvedDocuments, conn
                       ) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(doc id, root key, document) of every root row, built in Postgres."""
    spec = resolved.spec(doc.name)
    reader = _Reader(conn, config, resolved)
    root_keys = list(resolved.keys[spec.root])
    with conn.cursor(name=f"cdckit_verify_{doc.name.replace('-', '_')}") as cur:
        cur.itersize = 2000
        cur.execute(document_sql(spec, resolved))
        for (text,) in cur:
            raw = orjson.loads(text)
            seen: dict[str, set] | None = {} if spec.meta else None
            built, (_, key) = build(raw, spec.root, spec.columns, spec.relations, reader, resolved.keys, spec.rename,
                                    seen)
            if seen is not None:
                built[META] = meta_field(seen, resolved.keys)
            key_dict = dict(zip(root_keys, key))
            yield document_id(key_dict, root_keys), key_dict, built


def document_difference(got: dict[str, Any], want: dict[str, Any], spec_types: dict[str, Any],
                        meta_types: dict[str, dict[str, str]] | None = None) -> str | None:
    """The first field that differs; `_meta`'s key values by their columns' types (`meta_types`:
    bare table name -> column -> type), as the leaves are."""
    if META in got or META in want:
        where = _meta_difference(got.get(META), want.get(META), meta_types or {})
        if where is not None:
            return where
    return first_difference({k: v for k, v in got.items() if k != META},
                            {k: v for k, v in want.items() if k != META}, spec_types)


def _meta_difference(got: Any, want: Any, types: dict[str, dict[str, str]]) -> str | None:
    want = orjson.loads(orjson.dumps(want, default=str))   # as a store holds it: JSON
    if not isinstance(got, dict) or not isinstance(want, dict) or set(got) != set(want):
        return META
    for table, columns in want.items():
        held = got[table]
        if not isinstance(held, dict) or set(held) != set(columns):
            return f"{META}.{table}"
        for column, values in columns.items():
            kind = types.get(table, {}).get(column, "")
            if not isinstance(held[column], list) or len(held[column]) != len(values) or not all(
                    same(g, w, kind) for g, w in zip(held[column], values)):
                return f"{META}.{table}.{column}"
    return None


def first_difference(got: Any, want: Any, spec_types: dict[str, str], path: str = "") -> str | None:
    """The path of the first leaf that differs (types by column name, the flat verify's rules)."""
    if isinstance(want, dict) and not _is_value(want, path, spec_types):
        if not isinstance(got, dict):
            return path or "(document)"
        for k in sorted(set(want) | set(got)):  # a field left out is a null, as the flat verify takes it
            found = first_difference(got.get(k), want.get(k), spec_types, f"{path}.{k}" if path else k)
            if found:
                return found
        return None
    if isinstance(want, list) and path.split(".")[-1] in spec_types.get("__relations__", ()):
        if not isinstance(got, list) or len(got) != len(want):
            return path
        for i, (g, w) in enumerate(zip(got, want)):
            found = first_difference(g, w, spec_types, f"{path}[{i}]")
            if found:
                return found
        return None
    column = path.split(".")[-1].split("[")[0]
    return None if same(got, want, spec_types.get(column, "")) else path


def _is_value(value: dict, path: str, spec_types: dict[str, str]) -> bool:
    """A dict that is a column's value (json, hstore), not a nested document."""
    column = path.split(".")[-1].split("[")[0]
    return bool(path) and column in spec_types and column not in spec_types.get("__relations__", ())


def leaf_types(spec: DocumentSpec, resolved: ResolvedDocuments) -> dict[str, Any]:
    """Column name -> type over every table of the document (for `same`), and the relation labels."""
    out: dict[str, Any] = {}
    labels: set[str] = set()
    for table in spec.tables():
        out.update(resolved.types[table])

    def walk(rels):
        for r in rels:
            labels.add(r.label)
            walk(r.relations)

    walk(spec.relations)
    for label in labels:
        out.pop(label, None)
    out["__relations__"] = labels
    return out


def verify_documents(config: Config, stores, only: str | None = None) -> list:
    """A TableReport (pipelines/ops/verify_tables.py) per document, named 'document:<name>'."""
    reports = []
    with postgres.connect(config.postgres.reader_dsn_kwargs(), autocommit=False) as conn:
        resolved = resolve_documents(config, Catalog(conn))
        for doc in config.documents:
            if only is not None and only not in (doc.name, doc.store_table):
                continue
            report = TableReport(doc.store_table, stores={s: StoreDiff() for s in config.sinks})
            types = leaf_types(resolved.spec(doc.name), resolved)
            meta_types = {t.split(".", 1)[-1]: resolved.types[t] for t in resolved.spec(doc.name).tables()}
            search_t, cache_t = stores.search_tables[doc.store_table], stores.cache_tables[doc.store_table]
            seen = {s: 0 for s in config.sinks}
            if "search" in config.sinks:
                stores.search.engine.refresh(search_t.alias)
            for chunk in chunks(expected_documents(config, doc, resolved, conn), BATCH):
                report.rows += len(chunk)
                got: dict[str, dict[str, dict]] = {}
                if "search" in config.sinks:
                    got["search"] = stores.search.engine.mget(search_t.alias, [i for i, _, _ in chunk])
                if "cache" in config.sinks:
                    names = [render_key(cache_t.key_template, k, i) for i, k, _ in chunk]
                    values = stores.cache.r.mget(names)
                    got["cache"] = {i: orjson.loads(v) for (i, _, _), v in zip(chunk, values) if v is not None}
                for store, docs in got.items():
                    seen[store] += len(docs)
                    for doc_id, _, want in chunk:
                        have = docs.get(doc_id)
                        if have is None:
                            report.stores[store].add("missing", doc_id)
                            continue
                        where = document_difference(have, want, types, meta_types)
                        if where is not None:
                            report.stores[store].add("different", {"id": doc_id, "field": where})
            if "search" in config.sinks:
                held = stores.search.engine.count(search_t.alias)
                if held > seen["search"]:
                    report.stores["search"].add("extra", f"{held - seen['search']} more documents than root rows")
            if "cache" in config.sinks:
                held = stores.cache.count(cache_t, exact=True)
                if held > seen["cache"]:
                    report.stores["cache"].add("extra", f"{held - seen['cache']} more keys than root rows")
            reports.append(report)
    return reports
