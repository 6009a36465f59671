"""The live index beside the definition the config and the catalog make
(pipelines/apply/stores.py), and the differences: for `cdckit index show` and `status`."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from derived.sinks.search.definition import differences
from pipelines.apply.stores import definitions, search_engine
from pipelines.config import Config


@dataclass
class IndexComparison:
    table: str
    alias: str
    index: str | None                       # the index behind the alias (None: no live index)
    wanted: dict[str, Any]
    live: dict[str, Any] | None
    differences: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def compare(config: Config, names: list[str] | None = None, engine=None) -> list[IndexComparison]:
    """Each table's wanted definition beside its live one and the differences."""
    engine = engine or search_engine(config)
    wanted = definitions(config, names, reader=True)
    out = []
    for table in config.flat_tables:
        if table.name not in wanted:
            continue
        alias = table.index_name
        targets = engine.alias_targets(alias)
        if not targets:
            out.append(IndexComparison(table.name, alias, None, wanted[table.name], None,
                                       [f"no live index behind {alias} (`cdckit bootstrap` or `cdckit run` creates "
                                        "it; `cdckit rebuild search` after a loss)"]))
            continue
        live = engine.index_definition(alias)
        out.append(IndexComparison(table.name, alias, targets[0], wanted[table.name], live,
                                   differences(wanted[table.name], live)))
    return out
