from pathlib import Path

from pipelines.devstack.connect_layout import PLUGIN, assemble, worker_properties


def test_worker_class_path_and_isolated_debezium_plugin(tmp_path):
    lib, plugins = assemble(tmp_path)
    names = {p.name for p in lib.iterdir()}
    assert any(n.startswith("connect-runtime-4.") for n in names)
    assert not any(n.startswith(("debezium-", "postgresql-")) for n in names)
    plugin = {p.name for p in (plugins / PLUGIN).iterdir()}
    assert any(n.startswith("debezium-connector-postgres-") for n in plugin)
    assert any(n.startswith("postgresql-") for n in plugin)
    # The worker provides the Connect API and the clients: a second copy in the plugin would shadow them.
    assert not any(n.startswith(("connect-api-", "kafka-clients-", "slf4j-")) for n in plugin)
    # Idempotent: a second run changes nothing.
    assert assemble(tmp_path) == (lib, plugins)


def test_worker_properties_use_service_load():
    props = worker_properties("127.0.0.1:1", 2, Path("/p"))
    assert "plugin.discovery=service_load" in props
    assert "listeners=http://127.0.0.1:2" in props
