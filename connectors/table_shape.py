"""A table's columns as the catalog describes them, and what changed between two readings.

Columns are matched by `attnum`, Postgres' stable column number, not by name: so a RENAME is a
rename (same attnum, new name), not a drop and an add; a dropped column's number is never reused.
Pure: the catalog read is connectors/postgres.table_columns.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ChangeKind = Literal["added", "added_with_default", "dropped", "renamed", "retyped"]


@dataclass(frozen=True)
class Column:
    attnum: int
    name: str
    type: str               # format_type, e.g. 'numeric(12,2)', 'timestamp with time zone', 'integer[]'
    has_default: bool       # a DEFAULT: ADD COLUMN with one fills every existing row (no row event)

    def as_json(self) -> list:
        return [self.attnum, self.name, self.type, self.has_default]

    @classmethod
    def from_json(cls, data: list) -> "Column":
        attnum, name, type_, has_default = data
        return cls(int(attnum), str(name), str(type_), bool(has_default))


@dataclass(frozen=True)
class SchemaChange:
    table: str
    kind: ChangeKind
    column: str             # the column's name now (the old name for a drop)
    old: str | None = None  # a rename's old name, a type change's old type
    new: str | None = None  # a type change's new type

    def describe(self) -> str:
        return {
            "added": f"column {self.column} added",
            "added_with_default": f"column {self.column} added with a DEFAULT (existing rows have it, "
                                  f"without a change event)",
            "dropped": f"column {self.column} dropped",
            "renamed": f"column {self.old} renamed to {self.column}",
            "retyped": f"column {self.column} changed type from {self.old} to {self.new}",
        }[self.kind]


def diff(table: str, before: list[Column], after: list[Column]) -> list[SchemaChange]:
    """Every column change from `before` to `after`, in column order."""
    old = {c.attnum: c for c in before}
    new = {c.attnum: c for c in after}
    out: list[SchemaChange] = []
    for attnum in sorted(set(old) | set(new)):
        a, b = old.get(attnum), new.get(attnum)
        if a is None:
            out.append(SchemaChange(table, "added_with_default" if b.has_default else "added", b.name))
        elif b is None:
            out.append(SchemaChange(table, "dropped", a.name))
        else:
            if a.name != b.name:
                out.append(SchemaChange(table, "renamed", b.name, old=a.name))
            if a.type != b.type:
                out.append(SchemaChange(table, "retyped", b.name, old=a.type, new=b.type))
    return out
