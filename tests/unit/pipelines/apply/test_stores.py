"""Authentication and TLS settings reach each client library (no server needed to check that)."""
import base64

from pipelines.apply.stores import redis_client, search_engine
from pipelines.config import parse_config

BASE = {
    "postgres": {"host": "db", "database": "app", "user": "cdc", "password": {"env": "T_PG"},
                 "sslmode": "verify-full", "sslrootcert": "/certs/pg-ca.pem"},
    "kafka": {"bootstrap_servers": "k:9093", "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
              "sasl_username": "cdc", "sasl_password": {"env": "T_KAFKA"}, "ssl_ca_location": "/certs/kafka-ca.pem"},
    "connect": {"url": "http://connect:8083"},
    "tables": [{"name": "public.items"}],
    "search": {"kind": "elasticsearch", "url": "https://es:9200", "api_key": {"env": "T_ES"},
               "ca_certs": "/certs/es-ca.pem"},
    "redis": {"url": "rediss://cache:6380/2", "username": "cdc", "password": {"env": "T_REDIS"},
              "ca_certs": "/certs/redis-ca.pem"},
}


def config(monkeypatch, **search):
    for var, value in {"T_PG": "pg-pw", "T_KAFKA": "kafka-pw", "T_ES": "es-key", "T_REDIS": "redis-pw"}.items():
        monkeypatch.setenv(var, value)
    return parse_config({**BASE, "search": {**BASE["search"], **search}} if search else BASE)


def test_redis_acl_user_and_tls(monkeypatch):
    kw = redis_client(config(monkeypatch)).connection_pool.connection_kwargs
    assert (kw["username"], kw["password"], kw["db"]) == ("cdc", "redis-pw", 2)
    assert kw["ssl_ca_certs"] == "/certs/redis-ca.pem"


def test_kafka_sasl_and_tls(monkeypatch):
    conf = config(monkeypatch).kafka.client_config()
    assert conf["security.protocol"] == "SASL_SSL" and conf["sasl.mechanism"] == "SCRAM-SHA-512"
    assert (conf["sasl.username"], conf["sasl.password"]) == ("cdc", "kafka-pw")
    assert conf["ssl.ca.location"] == "/certs/kafka-ca.pem"


def test_postgres_password_and_tls(monkeypatch):
    kw = config(monkeypatch).postgres.dsn_kwargs()
    assert (kw["password"], kw["sslmode"], kw["sslrootcert"]) == ("pg-pw", "verify-full", "/certs/pg-ca.pem")


def test_elasticsearch_api_key_and_ca(monkeypatch):
    client = search_engine(config(monkeypatch)).client
    assert client._headers["authorization"] == "ApiKey es-key"
    node = client.transport.node_pool.all()[0]
    assert node.config.ca_certs == "/certs/es-ca.pem" and node.config.verify_certs


def test_opensearch_basic_auth(monkeypatch):
    cfg = config(monkeypatch, kind="opensearch", api_key=None, username="cdc", password={"env": "T_ES"})
    conn = search_engine(cfg).client.transport.get_connection()
    assert conn.headers["authorization"] == "Basic " + base64.b64encode(b"cdc:es-key").decode()
    assert conn.pool.ca_certs == "/certs/es-ca.pem"


def test_each_stores_timeout_reaches_its_client(monkeypatch):
    cfg = config(monkeypatch)
    assert redis_client(cfg).connection_pool.connection_kwargs["socket_timeout"] == 10.0   # the defaults
    assert search_engine(cfg).client._request_timeout == 30.0
    data = {**BASE, "search": {**BASE["search"], "timeout_s": 12}, "redis": {**BASE["redis"], "timeout_s": 2.5}}
    cfg = parse_config(data)
    kw = redis_client(cfg).connection_pool.connection_kwargs
    assert (kw["socket_timeout"], kw["socket_connect_timeout"]) == (2.5, 2.5)
    assert search_engine(cfg).client._request_timeout == 12.0
    opensearch = parse_config({**data, "search": {**data["search"], "kind": "opensearch"}})
    assert search_engine(opensearch).client.transport.get_connection().timeout == 12.0
