"""The `documents:` section: nested documents, one per row of a root table, built from related tables
(see derived/nested.py for what each relation kind means). Checked up front, errors naming the field;
what needs the catalog (key columns, joins left to the foreign keys) is resolved by
pipelines/documents/document_specs.py before the job starts."""
from __future__ import annotations

import re
import string
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from derived.nested import META
from derived.sinks.cache.keys import adjacent_placeholders

_IDENT = r"[A-Za-z_][A-Za-z0-9_$]*"
_TABLE = re.compile(rf"^{_IDENT}\.{_IDENT}$")
_LABEL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _qualified(v: str) -> str:
    if not _TABLE.match(v):
        raise ValueError(f"'{v}' is not schema.table")
    return v


def _index_name(v: str | None) -> str | None:
    if v is not None and not re.match(r"^[a-z0-9][a-z0-9_\-]*$", v):
        raise ValueError("index names are lower case letters, digits, '_' and '-'")
    return v


# Shared with pipelines/config.py's tables.
QualifiedTable = Annotated[str, AfterValidator(_qualified)]
IndexName = Annotated[str | None, AfterValidator(_index_name)]


class ThroughConfig(_Strict):
    table: QualifiedTable = Field(description="the far table of a many_to_many, e.g. public.tags")
    join: dict[str, str] | None = Field(None, min_length=1, description="link column -> far table column, e.g. "
                                        "{tag_id: id}; default: the link table's foreign key to it")


class LinkConfig(_Strict):
    table: QualifiedTable = Field(description="the link table of a many_to_many, e.g. public.user_tags")
    join: dict[str, str] | None = Field(None, min_length=1, description="link column -> parent column, e.g. "
                                        "{user_id: id}; default: the link table's foreign key to the parent")
    to: dict[str, str] | None = Field(None, min_length=1, description="link column -> the rows' table column, e.g. "
                                      "{tag_id: id}; default: the link table's foreign key to it")


class RelationConfig(_Strict):
    label: str = Field(description="the field of the parent document holding it")
    table: QualifiedTable = Field(description="schema.table; for many_to_many the link table, or with `link:` the "
                                  "table whose rows the list holds")
    type: Literal["one_to_many", "many_to_one", "many_to_many"]
    join: dict[str, str] | None = Field(None, min_length=1, description=(
        "one_to_many / many_to_many: child (link) column -> parent column, e.g. {order_id: id}; many_to_one: "
        "parent column -> this table's column, e.g. {customer_id: id}; default: the foreign key between them"))
    through: ThroughConfig | None = None
    link: LinkConfig | None = Field(None, description="many_to_many read the other way round: `table:` the rows the "
                                    "list holds, `link:` the table between (what pgsync calls through_tables)")
    columns: list[str] | None = Field(None, min_length=1, description="the columns kept; default: all")
    order_by: str | None = Field(None, description="list order (then the key); one_to_many and many_to_many")
    relations: list["RelationConfig"] = Field(default_factory=list, description="nested under each of its rows")
    rename: dict[str, str] = Field(default_factory=dict, description="column -> field name in the document, "
                                   "e.g. {name: tag_name}")
    value: str | None = Field(None, description="a scalar relation: this one column's values instead of the rows' "
                              "objects, e.g. `name` gives [\"Economics\", \"Career\"] (many_to_one: the value, or null)")
    null_when_empty: bool | None = Field(None, description="a list relation without rows shows null instead of []; "
                                         "default: the document's null_when_empty")

    @field_validator("label")
    @classmethod
    def _label(cls, v: str) -> str:
        if not _LABEL.match(v):
            raise ValueError(f"'{v}' is not a field name (letters, digits, '_')")
        return v

    @field_validator("order_by")
    @classmethod
    def _order_by(cls, v: str | None, info) -> str | None:
        if v is not None and info.data.get("type") == "many_to_one":
            raise ValueError("order_by orders a list: many_to_one holds one row")
        columns = info.data.get("columns")
        if v is not None and columns is not None and v not in columns:
            raise ValueError(f"order_by {v!r} is not among 'columns'")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "RelationConfig":
        if self.link is not None:
            # The same relation as table: <link>, through: {table: <rows>}: held in that one form.
            if self.type != "many_to_many" or self.through is not None or self.join is not None:
                raise ValueError("'link' is for many_to_many, and takes the place of 'through' and 'join' (give "
                                 "the joins as link.join and link.to)")
            link, self.link = self.link, None
            self.through = ThroughConfig(table=self.table, join=link.to)
            self.table, self.join = link.table, link.join
        if (self.type == "many_to_many") != (self.through is not None):
            raise ValueError("'through' is required for many_to_many and only there")
        _check_rename(self.rename, self.columns)
        if self.value is not None and (self.columns is not None or self.relations or self.rename):
            raise ValueError("a relation with 'value' holds that column's values: it takes no 'columns', "
                             "'rename' or nested 'relations'")
        if self.null_when_empty is not None and self.type == "many_to_one":
            raise ValueError("'null_when_empty' is for lists: many_to_one shows null without a row anyway")
        _unique_labels(self.relations, self.columns, self.rename)
        return self

    @property
    def row_table(self) -> str:
        """The table whose rows the relation's entries are (the far table of a many_to_many)."""
        return self.through.table if self.through is not None else self.table


class DocumentConfig(_Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_\-]*$", description="the document's name")
    root: QualifiedTable = Field(description="schema.table with one document per row")
    columns: list[str] | None = Field(None, min_length=1, description="root columns kept; default: all")
    index: IndexName = Field(None, description="search index (alias); default: the name")
    redis_key: str | None = Field(None, description="key template over the root's key, e.g. 'order:{id}'; "
                                  "default: 'document:<name>:{_id}'")
    relations: list[RelationConfig] = Field(min_length=1)
    rename: dict[str, str] = Field(default_factory=dict, description="root column -> field name in the document")
    mappings: dict[str, dict[str, Any]] = Field(default_factory=dict, description=(
        "field -> index mapping over the one derived from the column types; a nested field by its dotted path, "
        "e.g. {'customer.name': {type: keyword}}"))
    null_when_empty: bool = Field(False, description="list relations without rows show null instead of [] (as "
                                  "pgsync writes them); a relation's own null_when_empty overrides it")
    meta: bool = Field(False, description=(
        "add `_meta` (pgsync's field): per table, by bare table name, each key column's values of the rows that "
        "built the document, link tables' included, e.g. {tags: {id: [3, 7]}}; for queries such as 'the documents "
        "holding tag 7'"))

    @field_validator("redis_key")
    @classmethod
    def _redis_key(cls, v: str | None) -> str | None:
        if v is not None:
            fields = {f for _, f, _, _ in string.Formatter().parse(v) if f is not None}
            if not fields:
                raise ValueError("redis_key needs at least one {placeholder}")
            if adjacent_placeholders(v):
                raise ValueError("redis_key placeholders need text between them (e.g. '{a}:{b}')")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "DocumentConfig":
        _check_rename(self.rename, self.columns)
        _unique_labels(self.relations, self.columns, self.rename)
        # (with every column kept, the catalog's: pipelines/documents/document_specs.py)
        fields = {self.rename.get(c, c) for c in self.columns or ()} | set(self.rename.values()) \
            | {r.label for r in self.relations}
        if self.meta and META in fields:
            raise ValueError(f"meta: the document already has a field {META!r}")
        if self.meta:
            bare: dict[str, list[str]] = {}
            for table in self.tables():
                bare.setdefault(table.split(".", 1)[1], []).append(table)
            twice = sorted(t for names in bare.values() if len(names) > 1 for t in names)
            if twice:
                raise ValueError(f"meta: _meta names tables without their schema, and {twice} share a name")
        return self

    @property
    def index_name(self) -> str:
        return self.index or self.name

    @property
    def redis_key_template(self) -> str:
        return self.redis_key or f"document:{self.name}:{{_id}}"

    @property
    def store_table(self) -> str:
        """The name the stores know this document by (beside the tables' schema.table names)."""
        return f"document:{self.name}"

    def tables(self) -> list[str]:
        out = [self.root]

        def walk(rels: list[RelationConfig]) -> None:
            for r in rels:
                out.append(r.table)
                if r.through is not None:
                    out.append(r.through.table)
                walk(r.relations)

        walk(self.relations)
        return list(dict.fromkeys(out))

    def placements(self) -> list[tuple[str, str]]:
        """(config path, table) of every table the document names, for errors naming the field."""
        out = [("root", self.root)]

        def walk(rels: list[RelationConfig], path: str) -> None:
            for i, r in enumerate(rels):
                out.append((f"{path}.{i}.table", r.table))
                if r.through is not None:
                    out.append((f"{path}.{i}.through.table", r.through.table))
                walk(r.relations, f"{path}.{i}.relations")

        walk(self.relations, "relations")
        return out


def _unique_labels(relations: list[RelationConfig], columns: list[str] | None, rename: dict[str, str]) -> None:
    labels = [r.label for r in relations]
    twice = sorted({x for x in labels if labels.count(x) > 1})
    if twice:
        raise ValueError(f"relation labels used twice: {twice}")
    clash = sorted(set(labels) & ({rename.get(c, c) for c in columns} if columns else set(rename.values())))
    if clash:
        raise ValueError(f"relation labels clash with fields: {clash}")


def _check_rename(rename: dict[str, str], columns: list[str] | None) -> None:
    if columns is not None and set(rename) - set(columns):
        raise ValueError(f"rename names columns outside 'columns': {sorted(set(rename) - set(columns))}")
    bad = sorted(f for f in rename.values() if not _LABEL.match(f))
    if bad:
        raise ValueError(f"rename: {bad} are not field names (letters, digits, '_')")
    targets = list(rename.values())
    if len(set(targets)) != len(targets):
        raise ValueError("rename gives two columns one field name")
