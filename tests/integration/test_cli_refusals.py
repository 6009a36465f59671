"""Refusals that need the stack: secrets masked in connector status, tables checked against the database."""
import pytest

from tests.support.integration import cli, write_config
from tests.support.configs import with_

pytestmark = pytest.mark.integration

SECRET = "Sup3r-S3cret-Pa55"


@pytest.mark.parametrize("secrets,shown", [("reference", "database.password=${env:CDCKIT_PW}"),
                                            ("inline", "database.password=****")])
def test_connector_status_masks_password(stack, tmp_path, secrets, shown):
    from tests.support.integration import drop_connector, pg

    with pg(stack) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS public.masked_pw (id int PRIMARY KEY)")
    data = stack.config(tables=[{"name": "public.masked_pw"}])
    data["postgres"]["password"] = {"env": "CDCKIT_PW"}
    data["connect"]["secrets"] = secrets
    path = write_config(tmp_path, data)
    try:
        # trust auth accepts any password, so the connector really gets created with it
        result = cli("connector", "apply", "-c", str(path), env={"CDCKIT_PW": SECRET})
        assert result.returncode == 0, result.stderr
        assert shown in result.stdout
        status = cli("connector", "status", "--json", "-c", str(path), env={"CDCKIT_PW": SECRET})
        for text in (result.stdout, result.stderr, status.stdout, status.stderr):
            assert SECRET not in text
    finally:
        drop_connector(stack, data)


def test_tables_are_checked_against_the_database(stack, tmp_path):
    from connectors.postgres import key_identity
    from tests.support.integration import pg

    with pg(stack) as conn:
        conn.execute("DROP TABLE IF EXISTS public.keyed_by_email")
        conn.execute("CREATE TABLE public.keyed_by_email (id int PRIMARY KEY, email text NOT NULL UNIQUE, n int)")
        assert key_identity(conn, "public.keyed_by_email").identity_columns == ("id",)
        assert key_identity(conn, "public.no_such_table") is None
    data = stack.config(tables=[{"name": "public.keyed_by_email", "key": ["email"], "redis_key": "k:{email}"}])
    result = cli("connector", "apply", "-c", str(write_config(tmp_path, data)))
    assert result.returncode == 2 and "tables.0.key" in result.stderr and "REPLICA IDENTITY" in result.stderr
    missing = cli("connector", "apply", "-c", str(write_config(tmp_path, stack.config(
        tables=[{"name": "public.no_such_table"}]))))
    assert missing.returncode == 2 and "tables.0.name" in missing.stderr
    with pg(stack) as conn:
        conn.execute("ALTER TABLE public.keyed_by_email REPLICA IDENTITY USING INDEX keyed_by_email_email_key")
        ident = key_identity(conn, "public.keyed_by_email")
        assert (ident.replica_identity, ident.identity_columns, ident.primary_key) == ("index", ("email",), ("id",))
        conn.execute("ALTER TABLE public.keyed_by_email REPLICA IDENTITY FULL")
        assert key_identity(conn, "public.keyed_by_email").identity_columns == ("id", "email", "n")


def test_config_check_connect_checks_redis_key_placeholders_against_the_real_key(stack, tmp_path):
    """Without `key:` in the config only the database knows the key: `config check --connect` asks it."""
    from tests.support.integration import pg

    with pg(stack) as conn:
        conn.execute("DROP TABLE IF EXISTS public.placeholder_check")
        conn.execute("CREATE TABLE public.placeholder_check (id int PRIMARY KEY, email text)")
    wrong = stack.config(tables=[{"name": "public.placeholder_check", "redis_key": "pc:{email}"}])
    refused = cli("config", "check", "--connect", "-c", str(write_config(tmp_path, wrong)))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "tables.0.redis_key" in refused.stderr and "['email']" in refused.stderr and "['id']" in refused.stderr
    right = stack.config(tables=[{"name": "public.placeholder_check", "redis_key": "pc:{id}"}])
    passed = cli("config", "check", "--connect", "-c", str(write_config(tmp_path, right, "right.yaml")))
    assert passed.returncode == 0 and "redis_key placeholders match" in passed.stdout, passed.stdout + passed.stderr
    with pg(stack) as conn:
        conn.execute("DROP TABLE public.placeholder_check")
