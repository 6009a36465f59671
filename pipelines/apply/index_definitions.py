"""Each table's index definition as the config and the catalog make it (the column types come from
Postgres): for whatever creates an index on the driver (the job's first generation, a rebuild's
fresh one); how the live index compares is pipelines/ops/index_comparison.py's."""
from __future__ import annotations

from typing import Any

from derived.sinks.search.definition import DefinitionOptions, document_definition, index_definition, index_settings
from pipelines.config import Config, TableConfig
from pipelines.document_config import DocumentConfig


def options_for(config: Config, table: TableConfig) -> DefinitionOptions:
    s = table.search
    settings = {**_flat(config.search.index_settings), **_flat(s.settings)}
    return DefinitionOptions(columns=table.columns, rename=dict(table.rename),
                             numeric_as_number=list(table.numeric_as_number), text=s.text, json=s.json_mode,
                             dynamic=s.dynamic, kind=config.search.kind, settings=settings,
                             mappings=dict(table.search_mappings), gc_deletes_s=config.search.deleted_version_ttl_s)


def refresh_interval(config: Config, table: TableConfig) -> str | None:
    """The refresh interval the config gives the table's index (None: the engine's default)."""
    value = options_for(config, table).settings.get("index.refresh_interval")
    return None if value is None else str(value)


def refresh_intervals(config: Config) -> dict[str, str | None]:
    """Index name -> the refresh interval the config gives it (None: the engine's default), for
    every index the job writes: the tables' and the documents' (those take search.index_settings)."""
    out = {t.index_name: refresh_interval(config, t) for t in config.flat_tables}
    documents = _flat(config.search.index_settings).get("index.refresh_interval")
    out.update({d.index_name: None if documents is None else str(documents) for d in config.documents})
    return out


def definition_for(config: Config, table: TableConfig, types: dict[str, str]) -> dict[str, Any]:
    """Pure: the definition for these column types (name -> format_type)."""
    return index_definition(types, options_for(config, table))


def document_definition_for(config: Config, doc: DocumentConfig, types: dict[str, dict[str, str]]) -> dict[str, Any]:
    """Pure: a nested document's definition for its tables' column types (table -> name -> type)."""
    options = {t.name: options_for(config, t) for t in config.tables}
    return document_definition(doc, types, options, _flat(config.search.index_settings),
                               config.search.deleted_version_ttl_s)


def definitions(config: Config, tables: list[str] | None = None, reader: bool = False) -> dict[str, dict[str, Any]]:
    """schema.table (or a document's 'document:<name>') -> definition, reading the column types
    from the catalog (a table gone from the database gets only what the config says)."""
    from connectors import postgres

    wanted = [t for t in config.flat_tables if tables is None or t.name in tables]
    documents = [d for d in config.documents if tables is None or d.store_table in tables]
    if not wanted and not documents:
        return {}
    names = {t.name for t in wanted} | {name for d in documents for name in d.tables()}
    pg = config.postgres
    with postgres.connect(pg.reader_dsn_kwargs() if reader else pg.dsn_kwargs()) as conn:
        types = {name: {c.name: c.type for c in postgres.table_columns(conn, name)} for name in sorted(names)}
    out = {t.name: definition_for(config, t, types[t.name]) for t in wanted}
    out.update({d.store_table: document_definition_for(config, d, types) for d in documents})
    return out


def marker_definition(config: Config) -> dict[str, Any]:
    """The store marker index (derived/sinks/markers.py) gets the shared settings and gc_deletes too."""
    return {"settings": index_settings(_flat(config.search.index_settings), config.search.deleted_version_ttl_s)}


def _flat(settings: dict[str, Any]) -> dict[str, Any]:
    from derived.sinks.search.definition import flat_settings

    return flat_settings(settings)
