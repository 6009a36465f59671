"""Per-table document shaping: projection and renames from the config."""
from __future__ import annotations

from typing import Any, Protocol


class TableShape(Protocol):
    columns: list[str] | None
    rename: dict[str, str]


def shape(row: dict[str, Any], table: TableShape) -> dict[str, Any]:
    cols = table.columns if table.columns is not None else list(row)
    return {table.rename.get(c, c): row[c] for c in cols if c in row}


def shaped_field(column: str, table: TableShape) -> str | None:
    """The document field a column lands in, or None when projected away."""
    if table.columns is not None and column not in table.columns:
        return None
    return table.rename.get(column, column)
