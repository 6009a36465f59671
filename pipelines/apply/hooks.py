"""Transform hooks (tables.N.transform.hook: "module:function"): a user's function given each
upsert's typed row, returning the row the stores hold. Run where changes are applied (Spark's
executors, the rebuild, `dlq replay`) and by `verify` on Postgres's rows, so both see the same
documents. It must be pure: it runs again on redelivered and rebuilt changes. An exception, or a
value that is not a row (a dict), is a dead letter naming the table, the key and the hook, and
that change is not applied: the store keeps what it held until `cdckit dlq replay` after a fix.
"""
from __future__ import annotations

import importlib
import json
import logging
from typing import Any, Callable

from derived.change import Change, DeadLetter

log = logging.getLogger("cdckit.hooks")
_loaded: dict[str, Callable[[dict[str, Any]], Any]] = {}


class HookError(Exception):
    pass


def load_hook(spec: str) -> Callable[[dict[str, Any]], Any]:
    """The function `module:function` names; HookError saying what is wrong (at `config check`)."""
    if spec in _loaded:
        return _loaded[spec]
    module_name, _, name = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's to see
        raise HookError(f"{spec}: cannot import {module_name}: {type(exc).__name__}: {exc}") from None
    fn = getattr(module, name, None)
    if not callable(fn):
        raise HookError(f"{spec}: {module_name} has no function {name!r}")
    _loaded[spec] = fn
    return fn


def call_hook(fn: Callable, row: dict[str, Any]) -> dict[str, Any]:
    out = fn(dict(row))
    if not isinstance(out, dict):
        raise HookError(f"returned {type(out).__name__}, not a row (a dict)")
    return out


def run_hooks(changes: list[Change], hooks: dict[str, str], dead: list[DeadLetter]) -> list[Change]:
    """The changes with each hooked table's upserts transformed (not those no store will hold); the
    failed ones left out, as letters in `dead`."""
    kept = []
    for c in changes:
        spec = hooks.get(c.table)
        if spec is None or c.op != "upsert" or c.row is None or {"search", "cache"} <= set(c.hidden):
            kept.append(c)
            continue
        try:
            c.row = call_hook(load_hook(spec), c.row)
        except Exception as exc:  # noqa: BLE001 - a user's function: anything it raises is a letter
            reason = f"transform hook {spec}: {type(exc).__name__}: {str(exc)[:300]}"
            dead.append(DeadLetter(c.position, json.dumps(c.key, default=str).encode(), None, "transform", reason,
                                   {"table": c.table}))
            continue
        kept.append(c)
    return kept
