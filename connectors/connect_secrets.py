"""Secrets in a connector config as references that Kafka Connect resolves with its config
providers when it starts the connector, so the value is never stored in Connect's config topic nor
returned by its REST API (KIP-297). The worker declares the providers (`config.providers`); the
local stack's and compose's workers declare these two."""
from __future__ import annotations

import re
from pathlib import Path

# provider name -> class, as a worker's properties declare them
PROVIDERS = {"env": "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
             "dir": "org.apache.kafka.common.config.provider.DirectoryConfigProvider"}
_REFERENCE = re.compile(r"^\$\{[A-Za-z][\w.-]*:[^}]+\}$")


def worker_provider_properties() -> dict[str, str]:
    return {"config.providers": ",".join(PROVIDERS),
            **{f"config.providers.{name}.class": cls for name, cls in PROVIDERS.items()}}


def reference(env: str | None = None, file: Path | str | None = None) -> str:
    """`${env:NAME}` for an environment variable, `${dir:DIR:FILE}` for a file (the directory
    provider reads the whole file: keep it free of a trailing newline). Both as the worker sees them."""
    if (env is None) == (file is None):
        raise ValueError("give exactly one of env or file")
    if env is not None:
        return f"${{env:{env}}}"
    path = Path(file)
    return f"${{dir:{path.parent}:{path.name}}}"


def is_reference(value: str | None) -> bool:
    return value is not None and bool(_REFERENCE.match(value))
