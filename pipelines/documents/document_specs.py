"""The `documents:` config resolved against the catalog into the state model's specs
(derived/nested.DocumentSpec): joins left out are taken from the foreign keys, every column named
must exist. Runs on the driver before a job starts; errors name the config field. Also whether a
documents' state was built for these specs (its fingerprint), which a job and a rebuild's plan check."""
from __future__ import annotations

import hashlib
import string
from dataclasses import dataclass
from pathlib import Path

from derived.nested import META, DocumentSpec, Relation, Through, held_columns, join_edges, merge_columns
from pipelines.config import Config
from pipelines.document_config import RelationConfig
from pipelines.errors import ConfigError


@dataclass(frozen=True)
class ResolvedDocuments:
    specs: tuple[DocumentSpec, ...]
    keys: dict[str, tuple[str, ...]]          # table -> key columns
    types: dict[str, dict[str, str]]          # table -> column -> Postgres type

    def spec(self, name: str) -> DocumentSpec:
        return next(s for s in self.specs if s.name == name)

    def drift(self, current: dict[str, dict[str, str]]) -> dict[str, list[tuple[str, str]]]:
        """Per table the documents read, (column, what changed) for the columns they use whose
        type now (`current`: name -> type) differs from the one they are rendered with, or that
        are gone; an added column where a part shows every column. Unchanged tables left out."""
        used = self.used_columns()
        out: dict[str, list[tuple[str, str]]] = {}
        for table, before in self.types.items():
            now, cols = current.get(table), used.get(table)
            if now is None or now == before:
                continue
            lines = [(c, "dropped or renamed" if c not in now else f"type {t} -> {now[c]}")
                     for c, t in before.items() if now.get(c) != t and (cols is None or c in cols)]
            if cols is None:
                lines += [(c, "added") for c in now if c not in before]
            if lines:
                out[table] = lines
        return out

    def used_columns(self) -> dict[str, set[str] | None]:
        """The columns the documents read per table (None: every column, a part without `columns:`)."""
        used: dict[str, set[str] | None] = {}
        for spec in self.specs:
            for table, cols in held_columns(spec, self.keys, value_column_only=True).items():
                merge_columns(used, table, cols)
        for table, cols in self.joined().items():
            merge_columns(used, table, cols)
        return used

    def joined(self) -> dict[str, set[str]]:
        """The key and join columns per table: the documents' state compares their rendered values."""
        out: dict[str, set[str]] = {t: set(k) for t, k in self.keys.items()}
        for spec in self.specs:
            for e in join_edges(spec):
                out.setdefault(e.table, set()).update(e.cols)
                out.setdefault(e.parent, set()).update(e.parent_cols)
        return out


class Catalog:
    """What resolution reads from Postgres (a stand-in in unit tests)."""

    def __init__(self, conn):
        self.conn = conn

    def columns(self, table: str) -> dict[str, str] | None:
        from connectors import postgres

        if self.conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is None:
            return None
        return postgres.column_types(self.conn, table)

    def primary_key(self, table: str) -> tuple[str, ...]:
        from connectors import postgres

        ident = postgres.key_identity(self.conn, table)
        return ident.primary_key if ident is not None else ()

    def foreign_keys(self, table: str, references: str) -> list[dict[str, str]]:
        """Each foreign key of `table` to `references`: its column -> the referenced column."""
        rows = self.conn.execute(
            "SELECT c.oid, a.attname, af.attname FROM pg_constraint c "
            "CROSS JOIN LATERAL unnest(c.conkey, c.confkey) WITH ORDINALITY AS k(col, fcol, n) "
            "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.col "
            "JOIN pg_attribute af ON af.attrelid = c.confrelid AND af.attnum = k.fcol "
            "WHERE c.contype = 'f' AND c.conrelid = %s::regclass AND c.confrelid = %s::regclass "
            "ORDER BY c.oid, k.n", (table, references)).fetchall()
        out: dict[int, dict[str, str]] = {}
        for oid, col, fcol in rows:
            out.setdefault(oid, {})[col] = fcol
        return list(out.values())


def resolve_documents(config: Config, catalog: Catalog) -> ResolvedDocuments:
    keys: dict[str, tuple[str, ...]] = {}
    types: dict[str, dict[str, str]] = {}
    tables = {t.name: t for t in config.tables}
    specs = []
    for j, doc in enumerate(config.documents):
        for path, table in doc.placements():
            if table in types:
                continue
            cols = catalog.columns(table)
            if cols is None:
                raise ConfigError(f"documents.{j}.{path}", f"table {table} does not exist")
            types[table] = cols
            key = tuple(tables[table].key or catalog.primary_key(table))
            if not key:
                raise ConfigError(f"documents.{j}.{path}", f"{table} has no primary key: give it one, or "
                                  "'key' columns in its 'tables' entry")
            keys[table] = key
        _known_columns(f"documents.{j}.columns", doc.root, doc.columns, types)
        placeholders = {f for _, f, _, _ in string.Formatter().parse(doc.redis_key_template) if f is not None}
        allowed = {*keys[doc.root], "_id"}
        if not placeholders <= allowed:
            raise ConfigError(f"documents.{j}.redis_key", f"placeholders {sorted(placeholders - allowed)} are not "
                              f"key columns of {doc.root} ({', '.join(keys[doc.root])}) or _id")
        _known_columns(f"documents.{j}.rename", doc.root, list(doc.rename), types)
        _labels_free(f"documents.{j}", doc.relations, doc.columns or list(types[doc.root]), doc.rename)
        if doc.meta and META in {doc.rename.get(c, c) for c in doc.columns or types[doc.root]}:
            raise ConfigError(f"documents.{j}.meta", f"{doc.root} has a column {META!r}: rename it, or leave it out "
                              "of 'columns'")
        relations = tuple(_relation(rel, doc.root, f"documents.{j}.relations.{i}", types, catalog,
                                    doc.null_when_empty)
                          for i, rel in enumerate(doc.relations))
        specs.append(DocumentSpec(doc.name, doc.root, tuple(doc.columns) if doc.columns else None, relations,
                                  rename=tuple(doc.rename.items()), meta=doc.meta))
    return ResolvedDocuments(tuple(specs), keys, types)


def _relation(rel: RelationConfig, parent: str, path: str, types, catalog: Catalog,
              null_when_empty: bool = False) -> Relation:
    _known_columns(f"{path}.columns", rel.row_table, rel.columns, types)
    if rel.value is not None:
        _known_columns(f"{path}.value", rel.row_table, [rel.value], types)
    if rel.order_by is not None:
        _known_columns(f"{path}.order_by", rel.row_table, [rel.order_by], types)
        kind = types[rel.row_table][rel.order_by]
        if kind.endswith("[]") or kind in UNORDERED:
            raise ConfigError(f"{path}.order_by", f"{rel.row_table}.{rel.order_by} is {kind}: lists are ordered "
                              "by a scalar column")
    _known_columns(f"{path}.rename", rel.row_table, list(rel.rename), types)
    _labels_free(path, rel.relations, rel.columns or list(types[rel.row_table]), rel.rename)
    if rel.type == "many_to_one":   # parent.col = table.col
        join = rel.join or _foreign_key(catalog, parent, rel.table, f"{path}.join")
        _known_columns(f"{path}.join", parent, list(join), types)
        _known_columns(f"{path}.join", rel.table, list(join.values()), types)
    else:                           # table.col = parent.col
        join = rel.join or _foreign_key(catalog, rel.table, parent, f"{path}.join")
        _known_columns(f"{path}.join", rel.table, list(join), types)
        _known_columns(f"{path}.join", parent, list(join.values()), types)
    through = None
    if rel.through is not None:
        far = rel.through.join or _foreign_key(catalog, rel.table, rel.through.table, f"{path}.through.join")
        _known_columns(f"{path}.through.join", rel.table, list(far), types)
        _known_columns(f"{path}.through.join", rel.through.table, list(far.values()), types)
        through = Through(rel.through.table, tuple(far.items()))
    nested = tuple(_relation(r, rel.row_table, f"{path}.relations.{i}", types, catalog, null_when_empty)
                   for i, r in enumerate(rel.relations))
    own = rel.null_when_empty
    empty_null = rel.type != "many_to_one" and (null_when_empty if own is None else own)
    return Relation(rel.label, rel.table, rel.type, tuple(join.items()), tuple(rel.columns) if rel.columns else None,
                    rel.order_by, through, nested, value=rel.value, empty_null=empty_null,
                    rename=tuple(rel.rename.items()))


UNORDERED = {"json", "jsonb", "hstore", "bytea", "xml", "point", "box", "polygon", "circle", "line", "lseg", "path"}


def _labels_free(path: str, relations, columns: list[str], rename: dict[str, str] | None = None) -> None:
    """A relation's label must not hide a field of the rows it hangs off, nor a rename give two
    columns one field."""
    fields = [(rename or {}).get(c, c) for c in columns]
    twice = sorted({f for f in fields if fields.count(f) > 1})
    if twice:
        raise ConfigError(f"{path}.rename", f"{twice} would name two fields of one row: rename one of them")
    for i, rel in enumerate(relations):
        if rel.label in fields:
            raise ConfigError(f"{path}.relations.{i}.label", f"{rel.label!r} is also a column of the rows it "
                              "nests under: choose another label, or leave the column out with 'columns'")


def _foreign_key(catalog: Catalog, table: str, references: str, field: str) -> dict[str, str]:
    found = catalog.foreign_keys(table, references)
    if len(found) != 1:
        what = "no foreign key" if not found else f"{len(found)} foreign keys"
        raise ConfigError(field, f"{what} from {table} to {references}: give 'join' explicitly")
    return found[0]


def _known_columns(field: str, table: str, columns, types) -> None:
    unknown = sorted(set(columns or []) - set(types[table]))
    if unknown:
        raise ConfigError(field, f"{table} has no column(s) {unknown}")


def resolve_from_catalog(config: Config) -> ResolvedDocuments:
    """The documents' specs resolved against the database's catalog (errors name the field)."""
    from connectors import postgres

    with postgres.connect(config.postgres.dsn_kwargs()) as conn:
        return resolve_documents(config, Catalog(conn))


def fingerprint(resolved: ResolvedDocuments, config: Config) -> str:
    """What the state was built for: another spec, key, type of a key or join column, or numeric
    rendering needs another state (held rows keep the rendering they were folded in, and joins
    compare rendered values)."""
    joined: set[tuple[str, str]] = {(t, c) for t, cols in resolved.keys.items() for c in cols}
    for spec in resolved.specs:
        for e in join_edges(spec):
            joined.update((e.table, c) for c in e.cols)
            joined.update((e.parent, c) for c in e.parent_cols)
    types = sorted((t, c, resolved.types[t].get(c)) for t, c in joined)
    # Only the tables the documents read: another table's rendering is not in this state.
    numbers = sorted((t.name, tuple(sorted(t.numeric_as_number))) for t in config.tables
                     if t.numeric_as_number and t.name in resolved.keys)
    text = repr((resolved.specs, sorted(resolved.keys.items()), types, numbers))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def state_matches(config: Config, resolved: ResolvedDocuments, folder: Path) -> bool:
    """Whether the state in `folder` was built for these specs (or there is none yet)."""
    mark = folder / "cdckit-documents.txt"
    return not mark.exists() or mark.read_text().strip() == fingerprint(resolved, config)


def check_state_matches(config: Config, resolved: ResolvedDocuments, folder: Path) -> None:
    """The state in `folder` was built for these specs; a changed `documents:` section is refused
    (its documents need building anew from the topics, which `cdckit rebuild all` does)."""
    if not state_matches(config, resolved, folder):
        raise ConfigError("documents", "the documents' definitions (or the types of their key and join "
                          "columns, or numeric_as_number) changed since their state was built: "
                          "`cdckit rebuild all` builds them anew from the topics and hands them to the job")
    mark = folder / "cdckit-documents.txt"
    if not mark.exists():
        mark.parent.mkdir(parents=True, exist_ok=True)
        mark.write_text(fingerprint(resolved, config) + "\n")
