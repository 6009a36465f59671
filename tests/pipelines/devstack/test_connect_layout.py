from pipelines.devstack.connect_layout import PLUGIN, assemble, worker_properties


def test_classpath_swaps_jetty_and_isolates_debezium(tmp_path):
    lib, plugins = assemble(tmp_path)
    names = {p.name for p in lib.iterdir()}
    assert any(n.startswith("connect-runtime-") for n in names)
    assert any(n.startswith("jetty-client-") for n in names)  # the wheel's client is kept
    assert not any(n.startswith("jetty-") and not n.startswith("jetty-client-") for n in names)
    assert {"jetty9-server.jar", "jetty9-servlet.jar", "jetty9-security.jar"} <= names
    assert not any(n.startswith(("debezium-", "postgresql-", "mysql-", "mongodb-")) for n in names)
    plugin = {p.name for p in (plugins / PLUGIN).iterdir()}
    assert any(n.startswith("debezium-connector-postgres-") for n in plugin)
    assert any(n.startswith("postgresql-") for n in plugin)
    # Idempotent: a second run changes nothing.
    assert assemble(tmp_path) == (lib, plugins)
    assert {p.name for p in lib.iterdir()} == names


def test_worker_properties_use_service_load():
    props = worker_properties("127.0.0.1:1", 2, __import__("pathlib").Path("/p"))
    assert "plugin.discovery=service_load" in props
    assert "listeners=http://127.0.0.1:2" in props
