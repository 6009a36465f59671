"""Config and endpoint mistakes refuse to start, name the field or endpoint, and leak no secret."""
import pytest

from tests.helpers import cli, write_config
from tests.pipelines.test_config import with_

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
    from tests.helpers import drop_connector

    data = stack.config(tables=[{"name": "public.nothing_here"}])
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
