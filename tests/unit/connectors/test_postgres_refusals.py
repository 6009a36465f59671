"""libpq's refusals name the config field to fix (the integration test meets each for real)."""
from connectors.postgres import classify


def test_each_refusal_names_its_field():
    assert classify('FATAL:  password authentication failed for user "u"')[1] == "postgres.user / postgres.password"
    assert classify("SSL error: certificate verify failed")[1] == "postgres.sslrootcert"
    assert classify('pg_hba.conf rejects connection for host "127.0.0.1", user "u", database "d", no encryption')[1] \
        == "postgres.sslmode"
    assert classify("server does not support SSL, but SSL was required")[1] == "postgres.sslmode"
    assert classify("connection refused") == ("is unreachable", None)
