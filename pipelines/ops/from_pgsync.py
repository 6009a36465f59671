"""`cdckit config from-pgsync`: a pgsync schema file converted (pipelines/documents/pgsync_schema.py)
into cdckit configs, one per Postgres database, each checked as `config check` would before it is
written. The connections come from a base config (`--base`), else from pgsync's own environment
(PG_HOST, PG_PORT, PG_USER, PG_PASSWORD as a secret reference, ELASTICSEARCH_URL or
ELASTICSEARCH_SCHEME/HOST/PORT, OPENSEARCH); the catalog is read through them for the joins the
schema leaves to the foreign keys (`--no-catalog`: cdckit resolves them at start instead)."""
from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import yaml

from pipelines.config import parse_config
from pipelines.documents.pgsync_schema import Conversion, convert
from pipelines.errors import ConfigError

HEADER = """# Converted from the pgsync schema {source} by `cdckit config from-pgsync` (docs/coming-from-pgsync.md).
# Documents as pgsync builds them: a list without rows shows null; relations' labels, renames and
# mappings as the schema has them. Differences from pgsync's documents: {meta}; lists are
# ordered by their rows' keys (or order_by); values are typed by their Postgres types.
# Check the connections below, then: cdckit config check -c THIS_FILE --connect; cdckit bootstrap -c THIS_FILE
"""


def skeleton(database: str) -> dict[str, Any]:
    """Connections as pgsync reads them from its environment (the password stays a reference)."""
    env = os.environ
    url = env.get("ELASTICSEARCH_URL") or (f"{env.get('ELASTICSEARCH_SCHEME', 'http')}://"
                                           f"{env.get('ELASTICSEARCH_HOST', 'localhost')}:"
                                           f"{env.get('ELASTICSEARCH_PORT', '9200')}")
    opensearch = env.get("OPENSEARCH", "").lower() in ("1", "true", "yes", "on")
    postgres: dict[str, Any] = {"host": env.get("PG_HOST", "localhost"), "port": int(env.get("PG_PORT", "5432")),
                                "database": database, "user": env.get("PG_USER", "postgres")}
    if "PG_PASSWORD" in env:
        postgres["password"] = {"env": "PG_PASSWORD"}
    return {"topic_prefix": "cdc", "postgres": postgres,
            "kafka": {"bootstrap_servers": "localhost:9092"}, "connect": {"url": "http://localhost:8083"},
            "search": {"kind": "opensearch" if opensearch else "elasticsearch", "url": url},
            "redis": {"url": "redis://localhost:6379/0"}, "sinks": ["search"],
            "spark": {"checkpoint_dir": f"cdckit-checkpoint-{database}"}}


def configs_from(schema_path: Path, base: dict[str, Any] | None, use_catalog: bool,
                 meta: bool = False) -> dict[str, dict[str, Any]]:
    """database -> the cdckit config (a mapping, checked); ConfigError naming every refusal.
    `meta`: the documents carry pgsync's `_meta` (the keys of the rows that built them)."""
    try:
        schema = json.loads(schema_path.read_text())
    except FileNotFoundError:
        raise ConfigError("SCHEMA", f"no such file: {schema_path}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError("SCHEMA", f"{schema_path} is not JSON: {exc}") from None
    conversion = convert(schema, None, schema_path.name)
    if use_catalog and not conversion.refused:
        conversion = _with_catalog(schema, schema_path, base, conversion)
    if conversion.refused:
        lines = "\n".join(f"  {where}: {why}" for where, why in conversion.refused)
        raise ConfigError("SCHEMA", f"{len(conversion.refused)} part(s) of {schema_path.name} have no cdckit "
                                    f"equivalent (nothing was written):\n{lines}")
    out = {}
    for database, sections in conversion.configs.items():
        if meta:
            for doc in sections["documents"]:
                doc["meta"] = True
        data = _merged(base, database, sections)
        parse_config(data, f"the config converted for database {database}", resolve_secrets=False)
        out[database] = data
    return out


def _with_catalog(schema: Any, schema_path: Path, base: dict[str, Any] | None, first: Conversion) -> Conversion:
    from connectors import postgres
    from pipelines.documents.document_specs import Catalog

    result = Conversion()
    for database in first.configs:
        config = parse_config(_merged(base, database, first.configs[database]), "the converted config")
        try:
            with postgres.connect(config.postgres.reader_dsn_kwargs()) as conn:
                part = convert([e for e in schema if e.get("database") == database], Catalog(conn), schema_path.name)
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - any connection error: say which, and the way around it
            raise ConfigError("postgres", f"the catalog of {database} could not be read for the joins "
                                          f"({type(exc).__name__}: {str(exc)[:200]}); --no-catalog leaves them "
                                          "to cdckit's start") from None
        result.configs.update(part.configs)
        result.refused += part.refused
    return result


def _merged(base: dict[str, Any] | None, database: str, sections: dict[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(base) if base else skeleton(database)
    data.setdefault("postgres", {})["database"] = database
    data["tables"] = sections["tables"]
    data["documents"] = sections["documents"]
    if sections.get("search"):
        search = data.setdefault("search", {})
        search["index_settings"] = {**search.get("index_settings", {}), **sections["search"].get("index_settings", {})}
    return data


def render(configs: dict[str, dict[str, Any]], out: Path | None, source: str) -> list[tuple[Path | None, str]]:
    """(where, YAML text) per database: OUT, or OUT's name with -<database> for several; None: the
    caller prints it."""
    texts = []
    for database, data in configs.items():
        meta = ("`_meta` (meta: true) with every key typed as its column" if any(d.get("meta") for d in data["documents"])
                else "no `_meta` field (meta: true adds it)")
        text = HEADER.format(source=source, meta=meta) + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
        path = None if out is None else (out if len(configs) == 1 else
                                         out.with_name(f"{out.stem}-{database}{out.suffix or '.yaml'}"))
        texts.append((path, text))
    return texts
