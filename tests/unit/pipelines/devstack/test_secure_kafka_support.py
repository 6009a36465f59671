"""The secure test broker's pure parts: its PEM key store and its free ports (tests/support/secure_kafka.py)."""
import socket

import trustme

from tests.support.secure_kafka import free_port_run, pkcs8_keystore


def test_keystore_is_a_pkcs8_key_then_the_chain():
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    pem = pkcs8_keystore(cert)
    assert pem.startswith(b"-----BEGIN PRIVATE KEY-----\n")  # Kafka's PEM store reads PKCS#8 only
    key = serialization.load_pem_private_key(pem, password=None)
    chain = x509.load_pem_x509_certificates(pem[pem.index(b"-----BEGIN CERTIFICATE-----"):])
    assert chain[0].public_key().public_numbers() == key.public_key().public_numbers()
    names = chain[0].extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert chain[0].issuer == x509.load_pem_x509_certificate(ca.cert_pem.bytes()).subject


def test_free_port_run_skips_a_taken_port():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        first = free_port_run(2, start=port - 1, stop=port + 40)
        assert first > port  # port-1..port is not a free run: the search restarts after the taken one
        for p in (first, first + 1):
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", p))
