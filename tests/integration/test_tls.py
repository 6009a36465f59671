"""PostgreSQL and Redis speaking only TLS (certificates made by the fixture): cdckit connects with
`verify-full` / `rediss://` and the CA, and a wrong password, an unknown CA and a plaintext attempt
each fail with one line naming the endpoint and the config field to fix."""
from __future__ import annotations

import pytest

from connectors import postgres
from pipelines.config import parse_config
from pipelines.errors import CredentialsRefused, SecurityMismatch
from tests.support.configs import BASE
from tests.support.secure_servers import make_certificates, tls_postgres, tls_redis

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def pg_server(certs):
    with tls_postgres(certs) as server:
        yield server


@pytest.fixture(scope="module")
def redis_server(certs):
    with tls_redis(certs) as server:
        yield server


def pg_config(server, monkeypatch, password: str, **postgres):
    monkeypatch.setenv("CDCKIT_TEST_PG_PASSWORD", password)
    data = {**BASE, "postgres": {"host": "127.0.0.1", "port": server.port, "database": server.database,
                                 "user": server.user, "password": {"env": "CDCKIT_TEST_PG_PASSWORD"},
                                 "sslmode": "verify-full", **postgres}}
    return parse_config(data).postgres


def refusal(dsn) -> str:
    with pytest.raises(postgres.PostgresUnreachable) as raised:
        with postgres.connect(dsn):
            pass
    text = str(raised.value)
    assert "\n" not in text, text
    return text


def test_postgres_over_verified_tls(pg_server, certs, monkeypatch):
    cfg = pg_config(pg_server, monkeypatch, pg_server.password, sslrootcert=str(certs.ca))
    with postgres.connect(cfg.dsn_kwargs()) as conn:
        assert conn.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone()[0] is True
    endpoint = f"127.0.0.1:{pg_server.port}/postgres"
    wrong = refusal(pg_config(pg_server, monkeypatch, "not-the-password", sslrootcert=str(certs.ca)).dsn_kwargs())
    assert endpoint in wrong and "refused the credentials (check postgres.user / postgres.password)" in wrong
    unknown_ca = refusal(pg_config(pg_server, monkeypatch, pg_server.password,
                                   sslrootcert=str(certs.other_ca)).dsn_kwargs())
    assert endpoint in unknown_ca and "(check postgres.sslrootcert)" in unknown_ca
    plaintext = refusal(pg_config(pg_server, monkeypatch, pg_server.password, sslmode="disable").dsn_kwargs())
    assert endpoint in plaintext and "(check postgres.sslmode)" in plaintext
    assert pg_server.password not in wrong + unknown_ca + plaintext


def redis_config(server, monkeypatch, password: str, url: str | None = None, ca=None):
    from pipelines.config import parse_config

    monkeypatch.setenv("CDCKIT_TEST_REDIS_PASSWORD", password)
    redis = {"url": url or f"rediss://127.0.0.1:{server.port}/0", "username": server.user,
             "password": {"env": "CDCKIT_TEST_REDIS_PASSWORD"}}
    if ca is not None:
        redis["ca_certs"] = str(ca)
    return parse_config({**BASE, "redis": redis})


def redis_refusal(cfg, kind) -> str:
    from pipelines.ops.preflight import _redis

    with pytest.raises(kind) as raised:
        _redis(cfg)
    text = str(raised.value)
    assert "\n" not in text, text
    return text


def test_redis_over_tls_with_an_acl_user(redis_server, certs, monkeypatch):
    from pipelines.apply.stores import redis_client
    from pipelines.ops.preflight import _redis

    cfg = redis_config(redis_server, monkeypatch, redis_server.password, ca=certs.ca)
    _redis(cfg)
    client = redis_client(cfg)
    client.set("cdckit:tls", "yes")
    assert client.get("cdckit:tls") == b"yes"
    endpoint = f"127.0.0.1:{redis_server.port}"
    wrong = redis_refusal(redis_config(redis_server, monkeypatch, "nope", ca=certs.ca), CredentialsRefused)
    assert endpoint in wrong and "redis.username / redis.password" in wrong
    unknown_ca = redis_refusal(redis_config(redis_server, monkeypatch, redis_server.password, ca=certs.other_ca),
                               SecurityMismatch)
    assert endpoint in unknown_ca and "redis.ca_certs" in unknown_ca
    plaintext = redis_refusal(redis_config(redis_server, monkeypatch, redis_server.password,
                                           url=f"redis://127.0.0.1:{redis_server.port}/0"), SecurityMismatch)
    assert endpoint in plaintext and "redis.url" in plaintext
    assert redis_server.password not in wrong + unknown_ca + plaintext


@pytest.fixture(scope="module")
def search_server(certs):
    from tests.support.secure_servers import tls_search

    with tls_search(certs) as server:
        yield server


def search_config(server, monkeypatch, kind: str, password: str, url: str | None = None, ca=None):
    monkeypatch.setenv("CDCKIT_TEST_SEARCH_PASSWORD", password)
    search = {"kind": kind, "url": url or server.url, "username": server.user,
              "password": {"env": "CDCKIT_TEST_SEARCH_PASSWORD"}}
    if ca is not None:
        search["ca_certs"] = str(ca)
    return parse_config({**BASE, "search": search})


def search_refusal(cfg, kind) -> str:
    from pipelines.ops.preflight import _search

    with pytest.raises(kind) as raised:
        _search(cfg)
    text = str(raised.value)
    assert "\n" not in text, text
    return text


@pytest.mark.parametrize("kind", ["opensearch", "elasticsearch"])
def test_search_over_https_with_basic_auth(search_server, certs, monkeypatch, kind):
    from pipelines.apply.stores import search_engine
    from pipelines.ops.preflight import _search

    cfg = search_config(search_server, monkeypatch, kind, search_server.password, ca=certs.ca)
    _search(cfg)
    engine = search_engine(cfg)
    index = f"tls_{kind}"
    engine.create_index(index, {"settings": {"number_of_replicas": 0}})
    engine.bulk([{"index": {"_index": index, "_id": "1"}}, {"name": "over tls"}])
    engine.refresh(index)
    assert engine.mget(index, ["1"])["1"]["name"] == "over tls"
    engine.delete_index(index)
    wrong = search_refusal(search_config(search_server, monkeypatch, kind, "nope", ca=certs.ca), CredentialsRefused)
    assert search_server.url in wrong and "search.username / search.password" in wrong
    unknown_ca = search_refusal(search_config(search_server, monkeypatch, kind, search_server.password,
                                              ca=certs.other_ca), SecurityMismatch)
    assert search_server.url in unknown_ca and "search.ca_certs" in unknown_ca
    plain = search_server.url.replace("https://", "http://")
    plaintext = search_refusal(search_config(search_server, monkeypatch, kind, search_server.password, url=plain),
                               SecurityMismatch)
    assert plain in plaintext and "search.url" in plaintext
    assert search_server.password not in wrong + unknown_ca + plaintext
