"""The database password reaches the Debezium connector as a config provider reference that the real
Connect worker resolves: the connector logs in with it (the role must give its password), and
neither Connect's REST API nor its config topic holds the value."""
import json
import time
import uuid

import pytest
from psycopg import sql

from connectors.connect_client import ConnectClient
from tests.support.integration import assert_exact, cli, drop_connector, pg, write_config

pytestmark = pytest.mark.integration
PASSWORD_GROUP = "cdckit_password_login"  # pipelines/devstack/servers.py: its members log in with a password


def config_topic_values(bootstrap: str) -> list[bytes]:
    """Every record value of the Connect workers' config topics, from the start."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"cdckit-tests-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False})
    try:
        topics = [t for t in consumer.list_topics(timeout=10).topics if t.endswith("connect-configs")]
        assert topics, "no Connect config topic found"
        consumer.assign([TopicPartition(t, p, 0) for t in topics
                         for p in consumer.list_topics(t, timeout=10).topics[t].partitions])
        values, idle = [], 0
        while idle < 3:
            msgs = consumer.consume(500, 1)
            idle = idle + 1 if not msgs else 0
            values += [m.value() for m in msgs if m.error() is None and m.value() is not None]
        return values
    finally:
        consumer.close()


def test_the_connector_password_is_a_reference_the_worker_resolves(stack, tmp_path):
    if stack.world != "devstack":
        pytest.skip("the password group is the local stack's (pipelines/devstack/servers.py)")
    suffix = uuid.uuid4().hex[:6]
    name, role, password = f"sec_{suffix}", f"cdckit_sec_{suffix}", f"pw-{uuid.uuid4().hex}"
    table = f"public.{name}"
    with pg(stack) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN REPLICATION PASSWORD {} IN ROLE {}").format(
            sql.Identifier(role), sql.Literal(password), sql.Identifier(PASSWORD_GROUP)))
        conn.execute(sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(sql.Identifier(stack.pg_database),
                                                                         sql.Identifier(role)))
        conn.execute(sql.SQL("GRANT USAGE, CREATE ON SCHEMA public TO {}").format(sql.Identifier(role)))
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, name text)")
        conn.execute(f"INSERT INTO {table} SELECT g, 'row ' || g FROM generate_series(1, 500) g")
        conn.execute(sql.SQL("ALTER TABLE {} OWNER TO {}").format(sql.Identifier("public", name), sql.Identifier(role)))
    secret = tmp_path / "secrets" / "pg_password"
    secret.parent.mkdir()
    secret.write_text(password)  # the directory provider reads the file whole: no trailing newline
    data = stack.config(tables=[{"name": table, "redis_key": f"{name}:{{id}}", "index": name}],
                        spark={"checkpoint_dir": str(tmp_path / "ckpt")}, metrics_port=0)
    data["postgres"].update(user=role, password={"file": str(secret)})
    path = write_config(tmp_path, data)
    connector = f"{data['topic_prefix']}-postgres"
    try:
        import psycopg

        with pytest.raises(psycopg.OperationalError, match="password"):  # the role cannot log in without it
            psycopg.connect(host=stack.pg_host, port=stack.pg_port, dbname=stack.pg_database, user=role).close()
        boot = cli("bootstrap", "--once", "-c", str(path), timeout=400)
        assert boot.returncode == 0, boot.stderr[-3000:]
        assert_exact(stack, table, f"{name}:", name, timeout_s=120)   # the connector logged in: resolved
        client = ConnectClient(stack.connect_url)
        stored = client.get_config(connector)
        assert stored["database.password"] == f"${{dir:{secret.parent}:pg_password}}"
        tasks = client._request("GET", f"/connectors/{connector}/tasks")
        for shown in (stored, tasks):
            assert password not in json.dumps(shown)
        time.sleep(1)
        values = config_topic_values(stack.bootstrap_servers)
        assert any(connector.encode() in v for v in values), "the connector's config is not in the topic"
        assert not [v for v in values if password.encode() in v], "the password is at rest in Connect's config topic"
    finally:
        drop_connector(stack, data)
        with pg(stack) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table} CASCADE")
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
