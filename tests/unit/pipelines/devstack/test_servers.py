import uuid

import pytest

from pipelines.devstack import servers


def testkraft_cluster_id_never_starts_with_a_dash(monkeypatch):
    # 0xF8 encodes to '-' first in URL-safe base64; the storage tool would read the id as an option.
    draws = iter([uuid.UUID(bytes=b"\xf8" + b"\x00" * 15), uuid.UUID(bytes=b"\x10" * 16)])
    monkeypatch.setattr(servers.uuid, "uuid4", lambda: next(draws))
    cluster_id = servers.kraft_cluster_id()
    assert not cluster_id.startswith("-")
    assert len(cluster_id) == 22


def _props(text):
    return dict(line.split("=", 1) for line in text.splitlines())


def test_broker_properties_without_extra_listeners_are_unchanged(tmp_path):
    props = _props(servers.broker_properties(9092, 9093, tmp_path))
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9092"
    assert props["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"


def test_a_sasl_ssl_listener_beside_plaintext(tmp_path):
    keystore = tmp_path / "ks.pem"
    text = servers.broker_properties(9092, 9093, tmp_path, extra_listeners={"SASL_SSL": ("SASL_SSL", 9094)},
                                     extra=servers.sasl_ssl_listener_settings("SASL_SSL", keystore))
    props = _props(text)
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9094,CONTROLLER://127.0.0.1:9093"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9094"
    assert props["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT"
    assert "inter.broker.listener.name" not in props  # PLAINTEXT, Kafka's default
    assert props["listener.name.sasl_ssl.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert props["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"] == \
        "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    assert props["listener.name.sasl_ssl.ssl.keystore.type"] == "PEM"
    assert props["listener.name.sasl_ssl.ssl.keystore.location"] == str(keystore)


def test_the_controller_listener_name_is_taken(tmp_path):
    with pytest.raises(ValueError):
        servers.broker_properties(1, 2, tmp_path, extra_listeners={"CONTROLLER": ("SSL", 3)})


def test_only_scram_users_are_stored_by_the_broker(tmp_path):
    with pytest.raises(ValueError):
        servers.sasl_ssl_listener_settings("SASL_SSL", tmp_path, "PLAIN")


def test_scram_format_option_and_the_characters_its_syntax_cannot_quote():
    assert servers.scram_format_option("SCRAM-SHA-512", "cdckit", "s3cret-x") == \
        ["--add-scram", "SCRAM-SHA-512=[name=cdckit,password=s3cret-x]"]
    for user, password in (("a,b", "p"), ("a", "p]"), ("a", "p=q"), ("a b", "p")):
        with pytest.raises(ValueError):
            servers.scram_format_option("SCRAM-SHA-512", user, password)


@pytest.mark.parametrize("server", ["kafka", "connect", "search"])
def test_the_jvm_servers_take_the_stacks_java_options_before_their_main_class(monkeypatch, tmp_path, server):
    from pathlib import Path

    from pipelines.devstack import search_servers
    from pipelines.devstack.settings import StackSettings

    for module in (servers, search_servers):
        monkeypatch.setattr(module, "system_binary", lambda *a: Path("/usr/bin/java"))
        monkeypatch.setattr(module, "component_dir", lambda name: tmp_path / name)
    cls = {"kafka": servers.Kafka, "connect": servers.Connect, "search": search_servers.OpenSearch}[server]
    settings = StackSettings(state_dir=tmp_path, ports={"kafka": 1, "connect": 2, "search": 3})
    monkeypatch.setenv("CDCKIT_DEVSTACK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1  -Xss2m")
    argv = cls(settings).argv()
    assert argv.index("-XX:TieredStopAtLevel=1") < argv.index("-cp") and "-Xss2m" in argv
    monkeypatch.delenv("CDCKIT_DEVSTACK_JAVA_OPTIONS")
    assert not [a for a in cls(settings).argv() if "Tiered" in a or a == "-Xss2m"]
