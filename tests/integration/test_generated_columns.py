"""Stored generated columns (issue 37): PostgreSQL before 18 does not publish them to logical
replication, so a synced table keeping one would hold it as null in every document and Redis entry.
The table checks every command runs first (`config check --connect`, `connector apply`, `bootstrap`,
`run`) refuse it in one line naming table, column and the remedy; a `columns:` projection leaving it
out passes. On PostgreSQL 18+ nothing is refused: the publication publishes them instead."""
import uuid

import pytest

from tests.support.integration import cli, drop_pipeline, pg, write_config

pytestmark = pytest.mark.integration


def test_a_kept_generated_column_is_refused_and_a_projection_without_it_passes(stack, tmp_path):
    from connectors import postgres

    name = f"gen_{uuid.uuid4().hex[:6]}"
    table = f"public.{name}"
    with pg(stack) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, price numeric, qty int, "
                     "total numeric GENERATED ALWAYS AS (price * qty) STORED)")
        version = postgres.server_version(conn)
        assert postgres.generated_columns(conn, table) == ["total"]
    kept = stack.config(tables=[{"name": table}])
    try:
        path = write_config(tmp_path, kept)
        for command in (("config", "check", "--connect"), ("connector", "apply"), ("bootstrap", "--once")):
            if version >= postgres.PUBLISHES_GENERATED and command[0] != "config":
                continue  # published there: the check passes (below), no pipeline needed
            result = cli(*command, "-c", str(path), timeout=300)
            if version >= postgres.PUBLISHES_GENERATED:
                assert result.returncode == 0, result.stdout + result.stderr
                continue
            assert result.returncode == 2, (command, result.returncode, result.stdout[-500:], result.stderr[-2000:])
            line = next(x for x in result.stderr.splitlines() if f"{table}.total" in x)
            assert "tables.0.columns" in line and "generated" in line and "`columns:`" in line \
                and "publish_generated_columns = stored" in line, line
        without = stack.config(tables=[{"name": table, "columns": ["id", "price", "qty"]}], prefix=kept["topic_prefix"])
        passed = cli("config", "check", "--connect", "-c", str(write_config(tmp_path, without, "without.yaml")))
        assert passed.returncode == 0, passed.stdout + passed.stderr
    finally:
        drop_pipeline(stack, kept, table)
