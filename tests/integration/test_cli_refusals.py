"""Config and endpoint mistakes refuse to start, name the field or endpoint, and leak no secret."""
import pytest

from tests.support.integration import cli, write_config
from tests.unit.pipelines.test_config import with_

SECRET = "Sup3r-S3cret-Pa55"


def test_wrong_field_is_named(tmp_path):
    path = write_config(tmp_path, with_("search.kind", "solr"))
    result = cli("connector", "apply", "-c", str(path))
    assert result.returncode == 2
    assert "search.kind" in result.stderr


def test_missing_secret_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv("CDCKIT_NOPE", raising=False)
    path = write_config(tmp_path, with_("redis.password", {"env": "CDCKIT_NOPE"}))
    result = cli("config", "check", "-c", str(path))
    assert result.returncode == 2
    assert "redis.password" in result.stderr and "CDCKIT_NOPE" in result.stderr


def test_unreachable_connect_is_named_and_secret_not_printed(tmp_path):
    data = with_("connect.url", "http://127.0.0.1:9")
    data["postgres"]["password"] = {"env": "CDCKIT_PW"}
    path = write_config(tmp_path, data)
    result = cli("connector", "apply", "-c", str(path), env={"CDCKIT_PW": SECRET})
    assert result.returncode == 3
    assert "http://127.0.0.1:9" in result.stderr
    assert SECRET not in result.stdout + result.stderr


@pytest.mark.integration
def test_connector_status_masks_password(stack, tmp_path):
    from tests.support.integration import drop_connector, pg

    with pg(stack) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS public.masked_pw (id int PRIMARY KEY)")
    data = stack.config(tables=[{"name": "public.masked_pw"}])
    data["postgres"]["password"] = {"env": "CDCKIT_PW"}
    path = write_config(tmp_path, data)
    try:
        # trust auth accepts any password, so the connector really gets created with it
        result = cli("connector", "apply", "-c", str(path), env={"CDCKIT_PW": SECRET})
        assert result.returncode == 0, result.stderr
        assert "database.password=****" in result.stdout
        status = cli("connector", "status", "--json", "-c", str(path), env={"CDCKIT_PW": SECRET})
        for text in (result.stdout, result.stderr, status.stdout, status.stderr):
            assert SECRET not in text
    finally:
        drop_connector(stack, data)


@pytest.mark.integration
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
