import logging

from pipelines import secrets


def test_mask_replaces_every_registered_value_longest_first():
    secrets.register("abc")
    secrets.register("abcdef")
    assert secrets.mask("x abcdef y abc") == "x **** y ****"


def test_log_records_are_masked(caplog):
    secrets.register("topsecret-42")
    handler = logging.StreamHandler()
    handler.addFilter(secrets.MaskingFilter())
    record = logging.LogRecord("t", logging.INFO, __file__, 1, "password is %s", ("topsecret-42",), None)
    handler.filter(record)
    assert record.getMessage() == "password is ****"
