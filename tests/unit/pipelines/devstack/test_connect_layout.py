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


def test_client_security_reaches_the_worker_and_every_client_it_makes():
    from pipelines.config import KafkaConfig

    kafka = KafkaConfig(bootstrap_servers="127.0.0.1:9094", security_protocol="SASL_SSL",
                        sasl_mechanism="SCRAM-SHA-512", sasl_username="cdckit",
                        sasl_password={"env": "CDCKIT_UNIT_KAFKA_PW"}, ssl_ca_location="/tls/ca.pem")
    import os

    os.environ["CDCKIT_UNIT_KAFKA_PW"] = 'pa"ss\\word'
    try:
        text = worker_properties("127.0.0.1:9094", 2, Path("/p"), client=kafka.java_client_config())
    finally:
        del os.environ["CDCKIT_UNIT_KAFKA_PW"]
    props = _load(text)
    assert props["bootstrap.servers"] == "127.0.0.1:9094"
    assert not any(k.endswith(".bootstrap.servers") for k in props)
    for prefix in ("", "producer.", "consumer.", "admin."):
        assert props[f"{prefix}security.protocol"] == "SASL_SSL"
        assert props[f"{prefix}sasl.mechanism"] == "SCRAM-SHA-512"
        assert props[f"{prefix}ssl.truststore.type"] == "PEM"
        assert props[f"{prefix}ssl.truststore.location"] == "/tls/ca.pem"
        # As Java's Properties reads it back: the JSON-quoted password with its quote and backslash.
        assert props[f"{prefix}sasl.jaas.config"] == ('org.apache.kafka.common.security.scram.ScramLoginModule '
                                                      'required username="cdckit" password="pa\\"ss\\\\word";')


def test_without_client_settings_nothing_is_added():
    assert "security.protocol" not in worker_properties("127.0.0.1:1", 2, Path("/p"))


def _load(text):
    """Java's Properties.load for what properties_text writes: key=value lines, backslash escapes."""
    out = {}
    for line in text.splitlines():
        key, value = line.split("=", 1)
        chars, i, result = value, 0, []
        while i < len(chars):
            if chars[i] == "\\" and i + 1 < len(chars):
                result.append({"n": "\n", "r": "\r", "t": "\t"}.get(chars[i + 1], chars[i + 1]))
                i += 2
            else:
                result.append(chars[i])
                i += 1
        out[key] = "".join(result)
    return out
