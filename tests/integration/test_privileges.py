"""Least privilege: connectors/sql/roles.sql (rendered for a config) gives a replication role all
that bootstrap and Debezium need, and a read-only role what verify and status read; a role
without REPLICATION or without SELECT is refused before anything starts, the privilege named."""
import uuid

import pytest

from pipelines.config import parse_config
from pipelines.ops import privileges
from tests.support.integration import cli, drop_connector, pg, write_config

pytestmark = [pytest.mark.integration]
PASSWORD = "Priv-Pa55-3c9d1e"  # container Postgres asks host connections for one; trust auth ignores it
ENV = {"CDCKIT_PRIV_PW": PASSWORD}


@pytest.fixture
def roles(stack, tmp_path):
    """A table with rows, the script run by the superuser, and two roles of our own."""
    name = f"priv_{uuid.uuid4().hex[:6]}"
    table = f"public.{name}"
    cdc, reader = f"{name}_cdc", f"{name}_reader"
    data = stack.config(tables=[{"name": table, "redis_key": f"{name}:{{id}}", "index": name}],
                        spark={"checkpoint_dir": str(tmp_path / "ckpt"), "trigger": "500 ms"}, metrics_port=0)
    with pg(stack) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v text)")
        conn.execute(f"INSERT INTO {table} SELECT g, 'v' || g FROM generate_series(1, 50) g")
        conn.execute(privileges.roles_script(parse_config(data), cdc, reader))
        for role in (cdc, reader):
            conn.execute(f"ALTER ROLE {role} PASSWORD '{PASSWORD}'")
    try:
        yield data, table, cdc, reader
    finally:
        drop_connector(stack, data)
        pg_ = data["postgres"]
        with pg(stack) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}, {pg_['heartbeat_table']}, {pg_['signal_table']}, "
                         f"{pg_['truncate_table']}")
            for role in (cdc, reader):
                conn.execute(f"DROP OWNED BY {role}")
                conn.execute(f"DROP ROLE {role}")


def as_user(tmp_path, data, user, name):
    data = {**data, "postgres": {**data["postgres"], "user": user, "password": {"env": "CDCKIT_PRIV_PW"}}}
    return data, str(write_config(tmp_path, data, name))


def test_the_replication_role_passes_the_check_and_bootstraps(stack, tmp_path, roles):
    data, table, cdc, _ = roles
    data, path = as_user(tmp_path, data, cdc, "cdc.yaml")
    check = cli("config", "check", "--connect", "-c", path, env=ENV)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"{cdc} has every privilege" in check.stdout
    # Debezium connects as the role too: snapshot, slot, heartbeat; the publication is left as it is.
    boot = cli("bootstrap", "--once", "-c", path, env=ENV, timeout=400)
    assert boot.returncode == 0, boot.stderr[-3000:]
    verify = cli("verify", "-c", path, env=ENV, timeout=300)
    assert verify.returncode == 0, verify.stdout[-2000:] + verify.stderr[-2000:]


def test_the_read_only_role_reads_what_verify_and_status_read(stack, tmp_path, roles):
    from connectors import postgres

    data, table, _, reader = roles
    dsn = dict(host=stack.pg_host, port=stack.pg_port, dbname=stack.pg_database, user=reader, password=PASSWORD,
               sslmode="disable", connect_timeout=5)
    with postgres.connect(dsn) as conn:
        assert postgres.current_wal_lsn(conn) > 0
        postgres.slot_info(conn, data["postgres"]["slot"])  # None until Debezium made it: readable either way
        assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 50
        assert postgres.select_row(conn, table, ["v"], {"id": 1}) == {"v": "v1"}


def test_a_role_without_replication_is_refused_naming_it(stack, tmp_path, roles):
    data, _, cdc, _ = roles
    with pg(stack) as conn:
        conn.execute(f"ALTER ROLE {cdc} NOREPLICATION")
    data, path = as_user(tmp_path, data, cdc, "norepl.yaml")
    check = cli("config", "check", "--connect", "-c", path, env=ENV)
    assert check.returncode == 2
    assert f"missing privilege: REPLICATION (role attribute of {cdc}" in check.stdout
    assert "postgres.user" in check.stderr
    for args in (["connector", "apply"], ["bootstrap", "--once"]):
        refused = cli(*args, "-c", path, env=ENV, timeout=120)
        assert refused.returncode == 2, refused.stderr[-2000:]
        assert "config error at 'postgres.user'" in refused.stderr and "REPLICATION" in refused.stderr
        assert PASSWORD not in refused.stdout + refused.stderr
    assert not (tmp_path / "ckpt" / "query").exists()  # nothing started


def test_a_role_without_select_is_refused_naming_the_table(stack, tmp_path, roles):
    data, table, cdc, _ = roles
    with pg(stack) as conn:
        conn.execute(f"REVOKE SELECT ON {table} FROM {cdc}")
    data, path = as_user(tmp_path, data, cdc, "noselect.yaml")
    check = cli("config", "check", "--connect", "-c", path, env=ENV)
    assert check.returncode == 2
    assert f"missing privilege: SELECT on {table}" in check.stdout
    refused = cli("connector", "apply", "-c", path, env=ENV)
    assert refused.returncode == 2 and f"SELECT on {table}" in refused.stderr
