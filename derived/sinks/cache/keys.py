"""Redis key templates (`order:{a}:{b}`) rendered so that two rows never share a key.

With one placeholder a key is prefix + value + suffix: distinct values give distinct keys. With
several, raw values could slide across a separator (a="x:y", b="z" and a="x", b="y:z" both give
`order:x:y:z`), so each value has the separators' characters and `%` percent-encoded: the first
separator character in a key then always ends the value before it. Values without those characters
(the common case: numbers, uuids, plain codes) are written as they are. Adjacent placeholders have
no separator and are refused by the config.
"""
from __future__ import annotations

import string
from functools import lru_cache
from typing import Any, Mapping


@lru_cache(maxsize=256)
def _parsed(template: str) -> tuple[tuple[tuple[str, str | None, str, str | None], ...], frozenset[str]]:
    parts = tuple(string.Formatter().parse(template))
    fields = [i for i, (_, f, _, _) in enumerate(parts) if f is not None]
    if len(fields) < 2:
        return parts, frozenset()
    # Literal text between the first and the last placeholder (a part's literal precedes its field).
    between = "".join(parts[i][0] for i in range(fields[0] + 1, fields[-1] + 1))
    return parts, frozenset(between) | {"%"}


def placeholders(template: str) -> list[str]:
    return [f for _, f, _, _ in _parsed(template)[0] if f is not None]


def adjacent_placeholders(template: str) -> bool:
    parts = _parsed(template)[0]
    return any(f is not None and lit == "" and i > 0 and parts[i - 1][1] is not None
               for i, (lit, f, _, _) in enumerate(parts))


def render_key(template: str, key: Mapping[str, Any], doc_id: str) -> str:
    parts, escaped = _parsed(template)
    out: list[str] = []
    for literal, name, spec, conversion in parts:
        out.append(literal)
        if name is None:
            continue
        value = doc_id if name == "_id" else key[name]
        if conversion == "r":
            value = repr(value)
        elif conversion in ("s", "a"):
            value = str(value) if conversion == "s" else ascii(value)
        text = format(value, spec or "")
        if escaped:
            text = "".join(f"%{ord(c):02X}" if c in escaped else c for c in text)
        out.append(text)
    return "".join(out)


def key_pattern(template: str) -> str:
    """A SCAN pattern matching every key the template renders."""
    parts = string.Formatter().parse(template)
    return "".join(_glob_escape(lit) + ("*" if f is not None else "") for lit, f, _, _ in parts)


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)
