"""How cdckit notices that a derived store lost its data (a restart of a server that keeps nothing,
an index deleted by hand): a marker written once the store is known complete (a pipeline's first
batch from offset 0, a rebuild's switch). A missing marker means "rebuild me", never "start over
quietly": writing on would leave a store that looks alive and misses everything older.
"""
from __future__ import annotations

from typing import Any

import redis

from derived.sinks.search.engines import Engine, create_index_if_missing


def search_marker(prefix: str) -> str:
    return f"cdckit-meta-{prefix.lower()}"


def cache_marker(prefix: str) -> str:
    return f"cdckit:store:{prefix}"


def mark_search(engine: Engine, prefix: str, definition: dict[str, Any] | None = None) -> None:
    """`definition`: the marker index's settings (the config's shared ones, gc_deletes)."""
    create_index_if_missing(engine, search_marker(prefix), definition)


def mark_cache(client: redis.Redis, prefix: str, label: str) -> None:
    client.set(cache_marker(prefix), label)


def missing(prefix: str, engine: Engine | None, client: redis.Redis | None) -> list[str]:
    """The stores whose marker is gone: 'search', 'cache'."""
    gone = []
    if engine is not None and not engine.index_exists(search_marker(prefix)):
        gone.append("search")
    if client is not None and not client.exists(cache_marker(prefix)):
        gone.append("cache")
    return gone


def lost_message(stores: list[str], where: dict[str, Any]) -> str:
    named = ", ".join(f"{s} at {where[s]}" for s in stores)
    which = stores[0] if len(stores) == 1 else "all"
    return f"{named} lost its data (cdckit's marker is gone); run `cdckit rebuild {which}`"
