"""Typed errors, so the CLI maps each kind to a clear message and exit code."""
from __future__ import annotations

import re


class CdckitError(Exception):
    exit_code = 1


class ConfigError(CdckitError):
    """The configuration is wrong; nothing was started. Carries the dotted path of the field."""

    exit_code = 2

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"config error at '{field}': {message}")


class PrivilegesMissing(ConfigError):
    """The configured Postgres user lacks privileges cdckit or Debezium need (each named, as a DBA
    grants it); nothing was started. Exit 2, like any config error: the fix is a grant, or another
    `postgres.user` (connectors/sql/roles.sql creates one that has them)."""

    def __init__(self, user: str, missing: list[str], field: str = "postgres.user"):
        self.missing = missing
        shown = "; ".join(missing[:5]) + (f"; and {len(missing) - 5} more" if len(missing) > 5 else "")
        super().__init__(field, f"{user} lacks {shown} (`cdckit config check --connect` lists all; "
                         "connectors/sql/roles.sql grants them)")


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
        self.what, self.endpoint, self.fields = what, endpoint, fields
        super().__init__(f"{what} at {endpoint} refused the credentials (check {fields})"
                         + (f": {detail}" if detail else ""))


class SecurityMismatch(CdckitError):
    """A server answers, but not the way the config says to talk to it: another protocol on that
    port, or a TLS certificate the configured CA did not sign."""

    exit_code = 3

    def __init__(self, what: str, endpoint: str, problem: str, fields: str, detail: str = ""):
        self.what, self.endpoint, self.fields = what, endpoint, fields
        super().__init__(f"{what} at {endpoint} {problem} (check {fields})" + (f": {detail}" if detail else ""))


class RebuildRefused(CdckitError):
    """A rebuild that must not start as asked (nothing was changed)."""

    exit_code = 2


class NotCaughtUp(CdckitError):
    """`verify` waited in vain for the pipeline to apply the database's current position."""

    exit_code = 3


class StateLost(CdckitError):
    """What the pipeline builds on is gone (change topics recreated or lost, a store's data, the
    slot): a restart cannot help; the message names the recovery command."""

    exit_code = 5


class ConnectorFailed(CdckitError):
    """The Debezium connector or one of its tasks failed (the message carries its trace's first line)."""

    exit_code = 4


class SchemaChangeError(CdckitError):
    """A synced table's columns changed and its `on_schema_change` is `stop`: the message names the
    change and the commands to run; the next start goes on (status shows the work still to do)."""

    exit_code = 6


class DeadLettersLeft(CdckitError):
    """The work ran to its end, but records of it were dead-lettered (a store refused them, or they
    could not be decoded): a rebuild kept the old generation, a bootstrap's stores are not
    consistent with the snapshot. The message names the count and `cdckit dlq list`."""

    exit_code = 7


class PipelineFailed(CdckitError):
    """A failure inside Spark that is none of the above: its type and message, the trace in a file."""


# Exceptions raised inside a Spark batch or source, found by name in the text Spark wraps them in,
# and the typed error each becomes for the person who ran the command.
_FROM_SPARK = {"TopicLost": StateLost, "ConfigError": None, "SchemaChangeError": SchemaChangeError, "StoreUnavailable": PipelineFailed,
               "KafkaUnavailable": PipelineFailed, "NoFetchResponse": PipelineFailed,
               "GenerationError": PipelineFailed, "PostgresUnreachable": PipelineFailed}
# "Type: message" lines (a Python traceback's last line; a Java exception's first).
_RAISED = re.compile(r"^(?:Caused by: )?(?:[\w$]+\.)*([A-Z][\w$]*(?:Error|Exception|Lost|Unavailable|Unreachable|Response)): "
                     r"(\S[^\n]*)$", re.M)
# Spark's and py4j's wrappers around the exception that happened.
_WRAPPERS = {"PythonException", "Py4JJavaError", "Py4JException", "Py4JNetworkError", "StreamingQueryException",
             "SparkException", "ForeachBatchUserFuncException", "PySparkRuntimeError"}


def from_spark_failure(text: str) -> CdckitError:
    """One line for a Spark failure: cdckit's own exception when one was raised inside Spark, else
    the innermost exception that is not a wrapper (Spark prints the cause last), else Spark's
    first line."""
    raised = _RAISED.findall(text)
    ours = [(name, message) for name, message in raised if name in _FROM_SPARK]
    if ours:
        name, message = ours[-1]
        kind = _FROM_SPARK[name]
        if kind is None:
            field = re.match(r"config error at '([^']*)': (.*)", message)
            return ConfigError(*(field.groups() if field else ("?", message)))
        return kind(message.strip())
    causes = [(name, message) for name, message in raised if name not in _WRAPPERS]
    if causes:
        name, message = causes[-1]
        return PipelineFailed(f"{name}: {message.strip()[:400]}")
    first = next((line.strip() for line in text.splitlines() if line.strip()), "unknown failure")
    return PipelineFailed(first[:400])


def known_errors() -> tuple[type[BaseException], ...]:
    """Every error the CLI reports as a message and an exit code (its `exit_code`, else 1), not a
    traceback: this hierarchy, and the typed errors of the layers below (which cannot derive from it)."""
    from connectors.connect_client import ConnectError
    from connectors.postgres import PostgresUnreachable
    from derived.sinks.store_errors import GenerationError

    return (CdckitError, ConnectError, PostgresUnreachable, GenerationError)
