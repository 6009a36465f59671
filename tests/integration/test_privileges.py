"""Least privilege: connectors/sql/roles.sql (rendered for a config) gives a replication role all
that bootstrap and Debezium need, and a read-only role what verify and status read; a role
without REPLICATION or without SELECT is refused before anything starts, the privilege named."""
import json
import os
import subprocess
import uuid

import psycopg
import pytest
import yaml

from pipelines.config import parse_config
from pipelines.ops import privileges
from tests.support.integration import cli, drop_pipeline, pg, write_config
from tests.support.stack import ROOT

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
        drop_pipeline(stack, data, table)
        with pg(stack) as conn:
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


def test_the_local_stack_runs_as_its_own_roles(stack, tmp_path):
    """scripts/quickstart's path (pipelines/devstack/roles.py): generated password files the config
    refers to, the roles made from roles.sql, and then the pipeline as the replication role with
    verify and status as the read-only one, each password really asked for (password-login group)."""
    from pipelines.devstack import roles as local_roles

    name = f"lsr_{uuid.uuid4().hex[:6]}"
    table = f"public.{name}"
    cdc, reader = f"{name}_cdc", f"{name}_reader"
    data = stack.config(tables=[{"name": table, "redis_key": f"{name}:{{id}}", "index": name}],
                        spark={"checkpoint_dir": str(tmp_path / "ckpt"), "trigger": "500 ms"}, metrics_port=0)
    data["postgres"].update(user=cdc, password={"file": "secrets/cdc.password"}, reader_user=reader,
                            reader_password={"file": "secrets/reader.password"})
    path = write_config(tmp_path, data)
    with pg(stack) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v text)")
        conn.execute(f"INSERT INTO {table} SELECT g, 'v' || g FROM generate_series(1, 40) g")
    try:
        assert local_roles.ensure(path) == [cdc, reader]
        assert local_roles.ensure(path) == [cdc, reader]  # idempotent: a second quickstart run
        secret = (tmp_path / "secrets" / "cdc.password").read_text()
        assert (tmp_path / "secrets" / "cdc.password").stat().st_mode & 0o077 == 0
        check = cli("config", "check", "--connect", "-c", str(path))
        assert check.returncode == 0, check.stdout + check.stderr
        assert f"reader {reader} can read every synced table" in check.stdout
        boot = cli("bootstrap", "--once", "-c", str(path), timeout=400)
        assert boot.returncode == 0, boot.stderr[-3000:]
        verify = cli("verify", "-c", str(path), timeout=300)
        assert verify.returncode == 0, verify.stdout[-2000:] + verify.stderr[-2000:]
        status = cli("status", "-c", str(path))  # read by the reader; unhealthy only as no job runs
        assert status.returncode == 1 and "is not running: start it with `cdckit run`" in status.stdout, \
            status.stdout[-2000:] + status.stderr[-2000:]
        assert "denied" not in status.stdout + status.stderr and "postgres" in status.stdout
        # The connector holds a reference to the file, never the password.
        from connectors.connect_client import ConnectClient

        stored = ConnectClient(stack.connect_url).get_config(f"{data['topic_prefix']}-postgres")
        assert stored["database.password"] == f"${{dir:{tmp_path / 'secrets'}:cdc.password}}"
        assert secret not in json.dumps(stored) + boot.stdout + boot.stderr + verify.stdout + status.stdout
        # The reader really is read-only, and its password is really asked for.
        with psycopg.connect(host=stack.pg_host, port=stack.pg_port, dbname=stack.pg_database, user=reader,
                             password=(tmp_path / "secrets" / "reader.password").read_text(), autocommit=True) as r:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                r.execute(f"DELETE FROM {table}")
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(host=stack.pg_host, port=stack.pg_port, dbname=stack.pg_database, user=reader,
                            password="wrong", connect_timeout=5).close()
    finally:
        drop_pipeline(stack, data, table)
        with pg(stack) as conn:
            for role in (cdc, reader):
                if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
                    conn.execute(f"DROP OWNED BY {role}")
                    conn.execute(f"DROP ROLE {role}")


def test_the_compose_init_script_makes_roles_the_compose_config_can_use(stack, tmp_path):
    """compose/initdb/*.sql then 20-cdckit-roles.sh, as the Postgres image runs them on a new volume
    (here against a fresh database of the test server): the compose config's roles then pass
    `config check --connect` with the passwords compose gives them."""
    from pipelines.devstack.packages import postgres_binary

    db = f"compose_{uuid.uuid4().hex[:6]}"
    initdb = ROOT / "compose" / "initdb"
    env = {**os.environ, "PGHOST": stack.pg_host, "PGPORT": str(stack.pg_port), "POSTGRES_USER": stack.pg_user,
           "POSTGRES_DB": db, "CDCKIT_ROLES_SQL": str(ROOT / "connectors" / "sql" / "roles.sql"),
           "CDCKIT_CDC_PASSWORD": "Cdc-Pa55-7e1f", "CDCKIT_READER_PASSWORD": "Rdr-Pa55-2b9c",
           "OPENSEARCH_PASSWORD": "unused", "REDIS_PASSWORD": "unused",  # the stores are not contacted
           "PATH": f"{postgres_binary('psql').parent}:{os.environ['PATH']}"}
    with pg(stack) as conn:
        conn.execute(f'CREATE DATABASE "{db}"')
    try:
        for seed in sorted(initdb.glob("*.sql")):
            subprocess.run(["psql", "-v", "ON_ERROR_STOP=1", "-d", db, "-U", stack.pg_user, "-f", str(seed)],
                           env=env, check=True, capture_output=True)
        made = subprocess.run(["sh", str(initdb / "20-cdckit-roles.sh")], env=env, capture_output=True, text=True)
        assert made.returncode == 0, made.stderr
        with pg(stack) as conn:  # so the passwords are really asked for
            conn.execute("GRANT cdckit_password_login TO cdckit_cdc, cdckit_reader")
        compose = yaml.safe_load((ROOT / "compose" / "config" / "cdckit.yaml").read_text())
        compose["postgres"].update(host=stack.pg_host, port=stack.pg_port, database=db)
        path = write_config(tmp_path, compose)
        check = cli("config", "check", "--connect", "-c", str(path), env=env)
        assert check.returncode == 0, check.stdout + check.stderr
        assert "cdckit_cdc has every privilege" in check.stdout and "reader cdckit_reader can read" in check.stdout
        wrong = cli("config", "check", "--connect", "-c", str(path), env={**env, "CDCKIT_CDC_PASSWORD": "nope"})
        assert wrong.returncode != 0 and "nope" not in wrong.stdout + wrong.stderr
    finally:
        with pg(stack) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
            for role in ("cdckit_cdc", "cdckit_reader"):
                conn.execute(f"DROP ROLE IF EXISTS {role}")
