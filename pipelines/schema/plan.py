"""What a table's schema change means for its documents, per `on_schema_change` (pure).

- An added column without a DEFAULT: existing rows hold NULL, which a document without the field
  already says; new changes carry it. The live index mapping is extended in place.
- An added column with a DEFAULT, a dropped column, a rename: existing rows changed without a
  change event (a DEFAULT fills them in the catalog; a drop or rename rewrites no row), so their
  documents keep the old shape until every row is read again: an incremental snapshot of the table
  (Debezium's, through the signal table) re-reads each row at a version newer than its last change.
- A type change: the same re-read, and where the field's index mapping differs, a rebuild of the
  search index into a fresh generation after it (an index mapping cannot change type in place).

`rebuild` re-reads and rebuilds both stores for any change; `stop` stops the job naming the change
and the commands. A change to a column the table's `columns:` projects away is no change to any
document.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal

from connectors.table_shape import SchemaChange

Policy = Literal["evolve", "rebuild", "stop"]


@dataclass
class SchemaPlan:
    table: str
    changes: list[SchemaChange]
    extend_mapping: list[str] = field(default_factory=list)  # document fields to add to the live mapping
    resnapshot: bool = False                                   # re-read every row of the table
    rebuild: list[str] = field(default_factory=list)           # stores to rebuild after the re-read
    stop: str | None = None                                    # the job stops with this message

    @property
    def what(self) -> str:
        return "; ".join(c.describe() for c in self.changes)

    def describe(self) -> str:
        steps = []
        if self.extend_mapping:
            steps.append(f"index mapping extended with {', '.join(self.extend_mapping)}")
        if self.resnapshot:
            steps.append("every row re-read (incremental snapshot)")
        if self.rebuild:
            steps.append(f"then rebuild {' and '.join(self.rebuild)}")
        return f"{self.table}: {self.what}" + (f" -> {', '.join(steps)}" if steps else "")


def touches_documents(change: SchemaChange, columns: list[str] | None) -> bool:
    if columns is None:
        return True
    return change.column in columns or (change.kind == "renamed" and change.old in columns)


def plan(table: str, changes: list[SchemaChange], policy: Policy, columns: list[str] | None,
         field_of: Callable[[str], str], same_mapping: Callable[[str, str], bool]) -> SchemaPlan | None:
    """`field_of`: a column's document field (renames from the config); `same_mapping(old_type,
    new_type)`: whether both types map to the same index field type. None: nothing to do."""
    relevant = [c for c in changes if touches_documents(c, columns)]
    if not relevant:
        return None
    out = SchemaPlan(table, relevant)
    if policy == "stop":
        commands = (f"`cdckit snapshot resync {table}` (re-reads every row), then "
                    f"`cdckit rebuild search --table {table}` if a field changed type")
        out.stop = (f"{out.what}. on_schema_change is 'stop': the job stopped "
                    f"before applying changes of the new shape. Run {commands}, or set on_schema_change: evolve, "
                    f"then start the job again")
        return out
    for c in relevant:
        if c.kind in ("added", "added_with_default", "renamed"):
            out.extend_mapping.append(field_of(c.column))
        if c.kind != "added":
            out.resnapshot = True
        if c.kind == "retyped" and not same_mapping(c.old or "", c.new or "") and "search" not in out.rebuild:
            out.rebuild.append("search")
    if policy == "rebuild":
        out.resnapshot, out.rebuild = True, ["search", "cache"]
    return out


# Table settings whose edit leaves stored documents or keys in the old shape, and the stores it
# concerns: documents are only rewritten by a change of their row, so an edit needs a rebuild.
# `search` (the index definition: settings, mappings, options) is compared whole, a nested model
# by its fields; numeric_as_number changes the values both stores hold.
_EDIT_STORES = {"columns": ("search", "cache"), "rename": ("search", "cache"), "key": ("search", "cache"),
                "mappings": ("search",), "index": ("search",), "search": ("search",),
                "numeric_as_number": ("search", "cache"), "redis_key": ("cache",), "redis_format": ("cache",)}
# Settings of the top-level `search:` that are part of every table's index definition.
_SHARED_SEARCH = ("index_settings", "deleted_version_ttl_s")


def config_edits(old, new, old_search=None, new_search=None) -> tuple[list[str], list[str]]:
    """(edited settings, stores to rebuild) between two TableConfigs of one table, and between the
    top-level SearchConfigs when given (their shared index settings define every table's index)."""
    edited = [f for f in _EDIT_STORES if getattr(old, f) != getattr(new, f)]
    if old_search is not None and new_search is not None:
        edited += [f"search.{f}" for f in _SHARED_SEARCH if getattr(old_search, f) != getattr(new_search, f)]
    stores = [s for s in ("search", "cache")
              if any(s in _EDIT_STORES.get(f, ("search",)) for f in edited)]
    return edited, stores
