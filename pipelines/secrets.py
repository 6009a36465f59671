"""Secrets referenced by the config (environment variable or file), and masking of their values.

Every resolved secret value is registered here so any text leaving the process (CLI output,
logs, errors, dumped connector configs) can be passed through `mask` first.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, PrivateAttr, SecretStr, model_validator

MASK = "****"
_known: set[str] = set()


class SecretRef(BaseModel):
    """`{env: NAME}` or `{file: /path}`: never the value itself, so configs can be committed."""

    model_config = ConfigDict(extra="forbid")
    env: str | None = None
    file: Path | None = None
    _value: SecretStr | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _exactly_one(self) -> "SecretRef":
        if (self.env is None) == (self.file is None):
            raise ValueError("give exactly one of 'env' or 'file'")
        return self

    def resolve(self) -> SecretStr:
        if self.env is not None:
            value = os.environ.get(self.env)
            if value is None:
                raise ValueError(f"environment variable {self.env} is not set")
        else:
            try:
                value = Path(self.file).read_text().strip()
            except OSError as exc:
                raise ValueError(f"cannot read secret file {self.file}: {exc.strerror}") from None
        if not value:
            raise ValueError("the secret is empty")
        register(value)
        self._value = SecretStr(value)
        return self._value

    def get(self) -> str:
        """The resolved value; resolving on first use if the loader has not already."""
        return (self._value or self.resolve()).get_secret_value()

    def __repr__(self) -> str:
        return f"SecretRef({'env=' + self.env if self.env else 'file=' + str(self.file)})"


def register(value: str) -> None:
    if value:
        _known.add(value)


def registered() -> frozenset[str]:
    """The secret values registered so far."""
    return frozenset(_known)


def keep_only(values: frozenset[str]) -> None:
    """Forget every registered value but these (tests isolate their secrets with it)."""
    _known.intersection_update(values)
    _known.update(values)


def mask(text: str) -> str:
    # Longest first so a secret that contains another is masked whole.
    for value in sorted(_known, key=len, reverse=True):
        text = text.replace(value, MASK)
    return text


def print_masked(console, text: str) -> None:
    """What the CLI prints for people goes through here: secret values masked, no rich markup."""
    console.print(mask(text), highlight=False, markup=False)


class MaskingFilter(logging.Filter):
    """Masks secret values in every log record that passes through the handler."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _known:
            record.msg = mask(record.getMessage())
            record.args = ()
        return True


def install_log_masking() -> None:
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, MaskingFilter) for f in handler.filters):
            handler.addFilter(MaskingFilter())
