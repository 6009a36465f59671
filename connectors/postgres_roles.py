"""connectors/sql/roles.sql filled in for one pipeline: the psql script with its variables bound,
so it runs through `psql` without -v options, or through any driver (the integration test)."""
from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from connectors.postgres import marker_trigger_name

SCRIPT = Path(__file__).parent / "sql" / "roles.sql"
VARIABLES = ("cdc_role", "reader_role", "tables", "heartbeat_table", "signal_table", "truncate_table",
             "truncate_trigger", "publication")
_ROLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]{0,62}$")


def variables(cdc_role: str, reader_role: str, tables: list[str], heartbeat_table: str, signal_table: str,
              truncate_table: str, publication: str) -> dict[str, str]:
    for role in (cdc_role, reader_role):
        if not _ROLE.match(role):
            raise ValueError(f"{role!r} is not a plain role name (letters, digits, '_', '$')")
    if cdc_role == reader_role:
        raise ValueError("the replication role and the read-only role must differ")
    return {"cdc_role": cdc_role, "reader_role": reader_role, "tables": ",".join(tables),
            "heartbeat_table": heartbeat_table, "signal_table": signal_table, "truncate_table": truncate_table,
            "truncate_trigger": marker_trigger_name(truncate_table), "publication": publication}


def render(values: dict[str, str], script: str | None = None) -> str:
    """The script with psql's `:'name'` replaced by the value as a string literal."""
    # Read as package data (not through SCRIPT, a path): the package may be imported from a zip.
    text = resources.files("connectors").joinpath("sql/roles.sql").read_text() if script is None else script
    absent = [v for v in VARIABLES if v not in values]
    if absent:
        raise ValueError(f"no value for {', '.join(absent)}")

    def literal(m: re.Match) -> str:
        return "'" + values[m[1]].replace("'", "''") + "'"

    return re.sub(r":'(\w+)'", literal, text)
