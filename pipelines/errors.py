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


class CredentialsRefused(CdckitError):
    """A server answers but refuses the configured credentials."""

    exit_code = 3

    def __init__(self, what: str, endpoint: str, fields: str, detail: str = ""):
        super().__init__(f"{what} at {endpoint} refused the credentials (check {fields})"
                         + (f": {detail}" if detail else ""))


class RebuildRefused(CdckitError):
    """A rebuild that must not start as asked (nothing was changed)."""

    exit_code = 2


class NotCaughtUp(CdckitError):
    """`verify` waited in vain for the pipeline to apply the database's current position."""

    exit_code = 3


def known_errors() -> tuple[type[BaseException], ...]:
    """Every error the CLI reports as a message and an exit code (its `exit_code`, else 1), not a
    traceback: this hierarchy, and the typed errors of the layers below (which cannot derive from it)."""
    from connectors.connect_client import ConnectError
    from connectors.postgres import PostgresUnreachable
    from derived.sinks.errors import GenerationError

    return (CdckitError, ConnectError, PostgresUnreachable, GenerationError)
