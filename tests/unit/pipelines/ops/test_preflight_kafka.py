"""Kafka's refusals as one line naming the endpoint and the config fields, from what librdkafka says
(messages as librdkafka 2.x prints them to the error callback)."""
import pytest

from pipelines.config import KafkaConfig
from pipelines.errors import CredentialsRefused, EndpointUnreachable, SecurityMismatch
from pipelines.ops.preflight import kafka_refusal

EP = "127.0.0.1:59502"
TRANSPORT = 'KafkaError{code=_TRANSPORT,val=-195,str="Failed to get metadata: Local: Broker transport failure"}'


def sasl(**overrides):
    data = dict(bootstrap_servers=EP, security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                sasl_username="cdckit", ssl_ca_location="/tls/ca.pem")
    data.update(overrides)
    return KafkaConfig.model_construct(**data)  # no password needed: only the names are read


def one_line(error) -> str:
    text = str(error)
    assert "\n" not in text
    assert f"Kafka at {EP} " in text
    return text


def test_wrong_password_names_the_sasl_fields():
    error = kafka_refusal(sasl(), [
        f"sasl_ssl://{EP}/bootstrap: SASL authentication error: Authentication failed during authentication due "
        "to invalid credentials with SASL mechanism SCRAM-SHA-512 (after 12ms in state AUTH_REQ)",
        "1/1 brokers are down", TRANSPORT])
    assert isinstance(error, CredentialsRefused) and error.exit_code == 3
    assert one_line(error) == (f"Kafka at {EP} refused the credentials (check kafka.sasl_username / "
                               "kafka.sasl_password): SASL authentication error: Authentication failed during "
                               "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512")


def test_a_certificate_the_ca_did_not_sign_names_ssl_ca_location():
    error = kafka_refusal(sasl(), [
        f"sasl_ssl://{EP}/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: "
        "broker certificate could not be verified, verify that ssl.ca.location is correctly configured or root "
        "CA certificates are installed (install ca-certificates package) (after 3ms in state SSL_HANDSHAKE)",
        TRANSPORT])
    assert isinstance(error, SecurityMismatch) and error.exit_code == 3
    text = one_line(error)
    assert "presents a TLS certificate that the CA in /tls/ca.pem did not sign (check kafka.ssl_ca_location)" in text
    assert "after 3ms" not in text


def test_no_ca_configured_says_the_system_cas():
    error = kafka_refusal(sasl(ssl_ca_location=None), [f"ssl://{EP}/bootstrap: SSL handshake failed: "
                                                       "error:0A000086:SSL routines::certificate verify failed"])
    assert "that the system's CAs did not sign (check kafka.ssl_ca_location)" in one_line(error)


def test_a_certificate_for_another_host_names_the_address_too():
    error = kafka_refusal(sasl(), [f"ssl://{EP}/bootstrap: SSL handshake failed: error:0A000086:SSL routines::"
                                   "certificate verify failed: Hostname mismatch"])
    assert "(check kafka.bootstrap_servers / kafka.ssl_ca_location)" in one_line(error)


@pytest.mark.parametrize("message", [
    # PLAINTEXT (or SASL_PLAINTEXT) against a TLS listener: the broker drops the connection.
    f"{EP}/bootstrap: Disconnected while requesting ApiVersion: might be caused by incorrect security.protocol "
    "configuration (connecting to a SSL listener?) or broker version is < 0.10 (see api.version.request) "
    "(after 2ms in state APIVERSION_QUERY)",
    # TLS against a plaintext listener.
    f"ssl://{EP}/bootstrap: SSL handshake failed: Disconnected: connecting to a PLAINTEXT broker listener? "
    "(after 1ms in state SSL_HANDSHAKE)",
])
def test_another_protocol_on_the_port_names_security_protocol(message):
    error = kafka_refusal(sasl(security_protocol="PLAINTEXT", sasl_mechanism=None), [message, TRANSPORT])
    assert isinstance(error, SecurityMismatch)
    assert "does not speak PLAINTEXT on that port (check kafka.security_protocol)" in one_line(error)


def test_a_mechanism_the_broker_does_not_offer_names_sasl_mechanism():
    error = kafka_refusal(sasl(sasl_mechanism="SCRAM-SHA-256"), [
        f"sasl_ssl://{EP}/bootstrap: Unsupported SASL mechanism: broker's supported mechanisms: SCRAM-SHA-512"])
    assert "does not offer SASL mechanism SCRAM-SHA-256 (check kafka.sasl_mechanism)" in one_line(error)


def test_nothing_listening_stays_unreachable_with_the_exception():
    error = kafka_refusal(sasl(security_protocol="PLAINTEXT"), [
        f"{EP}/bootstrap: Connect to ipv4#{EP} failed: Connection refused (after 0ms in state CONNECT)",
        "1/1 brokers are down", TRANSPORT])
    assert isinstance(error, EndpointUnreachable)
    assert one_line(error) == f"Kafka at {EP} is unreachable: {TRANSPORT}"


def test_an_authentication_word_in_the_exception_alone_still_means_credentials():
    # The old check looked at the exception text only: what it matched still maps the same way.
    error = kafka_refusal(sasl(), ['KafkaError{code=_AUTHENTICATION,val=-169,str="Authentication failed"}'])
    assert isinstance(error, CredentialsRefused)


class _FakeAdmin:
    """list_topics fails; poll delivers `messages` to the error callback, as librdkafka's queue does."""

    calls = 0

    def __init__(self, conf, messages):
        self.cb, self.messages = conf["error_cb"], messages

    def list_topics(self, timeout):
        from confluent_kafka import KafkaError, KafkaException

        type(self).calls += 1
        raise KafkaException(KafkaError(KafkaError._TRANSPORT,
                                        "Failed to get metadata: Local: Broker transport failure"))

    def poll(self, timeout):
        for m in self.messages:
            self.cb(type("E", (), {"str": lambda self, m=m: m})())


def _run_preflight(monkeypatch, messages, timeout_s):
    import time

    import confluent_kafka.admin

    from pipelines.ops import preflight

    _FakeAdmin.calls = 0
    monkeypatch.setattr(confluent_kafka.admin, "AdminClient", lambda conf: _FakeAdmin(conf, messages))
    config = type("C", (), {"kafka": KafkaConfig(bootstrap_servers=EP)})()
    started = time.monotonic()
    with pytest.raises(Exception) as raised:
        preflight._kafka(config, timeout_s=timeout_s)
    return raised.value, time.monotonic() - started


def test_a_refusal_that_says_why_ends_the_wait_at_once(monkeypatch):
    error, took = _run_preflight(monkeypatch, [f"{EP}/bootstrap: Disconnected while requesting ApiVersion: might "
                                              "be caused by incorrect security.protocol configuration"], 30)
    assert isinstance(error, SecurityMismatch) and _FakeAdmin.calls == 1 and took < 5


def test_a_silent_broker_is_waited_for_until_the_timeout(monkeypatch):
    error, took = _run_preflight(monkeypatch, ["1/1 brokers are down"], 0.5)
    assert isinstance(error, EndpointUnreachable) and _FakeAdmin.calls >= 2


def test_plaintext_against_a_tls_listener_as_librdkafka_2_16_logs_it():
    error = kafka_refusal(sasl(security_protocol="PLAINTEXT"), [
        f"[thrd:{EP}/bootstrap]: {EP}/bootstrap: Disconnected: connection closed by peer: receive 0 after POLLIN "
        "(after 34ms in state APIVERSION_QUERY)", "1/1 brokers are down", TRANSPORT])
    assert isinstance(error, SecurityMismatch)
    assert one_line(error) == (f"Kafka at {EP} does not speak PLAINTEXT on that port (check kafka.security_protocol): "
                               "Disconnected: connection closed by peer: receive 0 after POLLIN")


def test_failure_log_lines_are_kept_and_others_dropped():
    from pipelines.ops.preflight import _FailureLines

    seen = []
    logger = _FailureLines(seen)
    logger.log(20, "%s [%s] %s", "FAIL", "rdkafka#producer-1", "x: Disconnected (after 1ms in state APIVERSION_QUERY)")
    logger.log(20, "%s [%s] %s", "CONNECT", "rdkafka#producer-1", "x: Connected")
    assert seen == ["x: Disconnected (after 1ms in state APIVERSION_QUERY)"]


def test_tls_without_sasl_on_a_sasl_listener_names_the_protocol_and_sasl_fields():
    closed = (f"[thrd:ssl://{EP}/bootstrap]: ssl://{EP}/bootstrap: Disconnected: SSL connection closed by peer "
              "(after 0ms in state UP)")
    error = kafka_refusal(sasl(security_protocol="SSL", sasl_mechanism=None),
                          [closed, "1/1 brokers are down", TRANSPORT])
    assert isinstance(error, SecurityMismatch)
    assert one_line(error) == (f"Kafka at {EP} closed the SSL connection before any request: the listener may expect "
                               "a SASL login (check kafka.security_protocol, kafka.sasl_*): Disconnected: SSL "
                               "connection closed by peer")
    # With SASL configured the same line is no such hint (the login itself would have failed first).
    assert isinstance(kafka_refusal(sasl(), [closed, TRANSPORT]), EndpointUnreachable)
