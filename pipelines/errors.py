"""Typed errors, so the CLI maps each kind to a clear message and exit code."""
from __future__ import annotations


class CdckitError(Exception):
    exit_code = 1


class ConfigError(CdckitError):
    """The configuration is wrong; nothing was started. Carries the dotted path of the field."""

    exit_code = 2

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"config error at '{field}': {message}")


class EndpointUnreachable(CdckitError):
    """A server named in the config does not answer."""

    exit_code = 3

    def __init__(self, what: str, endpoint: str, detail: str = ""):
        self.what, self.endpoint = what, endpoint
        super().__init__(f"{what} at {endpoint} is unreachable" + (f": {detail}" if detail else ""))
