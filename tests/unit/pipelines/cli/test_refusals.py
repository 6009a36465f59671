"""Config and endpoint mistakes refuse to start, name the field or endpoint, and leak no secret
(the real `cdckit` entry point in a child process; nothing needs to answer)."""
from tests.support.configs import with_
from tests.support.integration import cli, write_config

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


def test_index_show_refuses_a_table_outside_the_config(tmp_path):
    path = write_config(tmp_path, with_("search.kind", "opensearch"))
    result = cli("index", "show", "public.nope", "-c", str(path))
    assert result.returncode == 2
    assert "public.nope is not a table of the config" in result.stderr
