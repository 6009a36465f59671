"""Upserts' rows in the shape documents hold: typed values (connectors/typed_values.py) by the
columns' Postgres types. Pure: the types are given."""
from __future__ import annotations

from typing import Iterable, Mapping

from connectors.typed_values import row_converter
from derived.change import Change


def columns_seen(changes: Iterable[Change]) -> dict[str, set[str]]:
    """Each table of these upserts, with the columns their rows carry."""
    out: dict[str, set[str]] = {}
    for c in changes:
        if c.op == "upsert" and c.row is not None:
            out.setdefault(c.table, set()).update(c.row)
    return out


def type_rows(changes: Iterable[Change], types: Mapping[str, Mapping[str, str]],
              numbers: Mapping[str, frozenset[str]]) -> None:
    """Every upsert's row with typed values, in place."""
    converters = {t: row_converter(cols, numbers.get(t, frozenset())) for t, cols in types.items()}
    for c in changes:
        if c.op == "upsert" and c.row is not None and c.table in converters:
            c.row = converters[c.table](c.row)
