"""Per-table document shaping: projection and renames from the config, then the computed fields
(derived/transforms.py) and the fields a store leaves out. The sinks and `verify` shape with it."""
from __future__ import annotations

from typing import Any, Protocol

from derived.transforms import computed_fields


class TableShape(Protocol):
    columns: list[str] | None
    rename: dict[str, str]


def shape(row: dict[str, Any], table: TableShape) -> dict[str, Any]:
    cols = table.columns if table.columns is not None else list(row)
    doc = {table.rename.get(c, c): row[c] for c in cols if c in row}
    computed = getattr(table, "computed", None)
    if computed:
        doc.update(computed_fields(row, computed))
    for name in getattr(table, "remove", ()):
        doc.pop(name, None)
    return doc


def shaped_field(column: str, table: TableShape) -> str | None:
    """The document field a column lands in, or None when projected away."""
    if table.columns is not None and column not in table.columns:
        return None
    field = table.rename.get(column, column)
    return None if field in getattr(table, "remove", ()) else field
