"""Where a store's visibility watermark lives, beside the data its readers read (issue #23): a
Redis key in the live database, a document in an index of its own in the search engine (not
behind an alias, so a generation switch leaves it; not the store marker's index, which a publish
would create again after the engine lost its data, hiding the loss). Both only move forward: a Lua max in Redis, an
external version equal to the position in the search engine. Light on purpose: pipelines/client.py
imports it into applications."""
from __future__ import annotations

from typing import Any

SEARCH_DOC = "visible"

# Sets the key to ARGV[1] unless it holds a higher position already; returns what it holds then.
_MAX = """
local held = tonumber(redis.call('GET', KEYS[1]) or '0')
local new = tonumber(ARGV[1])
if new > held then redis.call('SET', KEYS[1], ARGV[1]) return new end
return held
"""


def cache_key(prefix: str) -> str:
    return f"cdckit:visible:{prefix}"


def search_index(prefix: str) -> str:
    return f"cdckit-visible-{prefix.lower()}"


def publish_cache(client: Any, prefix: str, lsn: int) -> int:
    return int(client.eval(_MAX, 1, cache_key(prefix), str(int(lsn))))


def carry_cache(live: Any, spare: Any, prefix: str) -> None:
    """Into a database about to be swapped in: at least the live one's position."""
    held = live.get(cache_key(prefix))
    if held is not None:
        publish_cache(spare, prefix, int(held))


def read_cache(client: Any, prefix: str) -> int:
    return int(client.get(cache_key(prefix)) or 0)


def ensure_search_index(engine: Any, prefix: str, definition: dict[str, Any] | None) -> None:
    from derived.sinks.search.engines import create_index_if_missing

    create_index_if_missing(engine, search_index(prefix), definition)


def publish_search(engine: Any, prefix: str, lsn: int, at: float) -> None:
    """Indexed with the position as external version (`external_gte`): an older one is refused.
    Positions above 2^63 cannot happen (WAL positions are far below)."""
    answer = engine.bulk([{"index": {"_index": search_index(prefix), "_id": SEARCH_DOC, "version": int(lsn),
                                     "version_type": "external_gte"}}, {"lsn": int(lsn), "published_at": at}])
    item = next(iter(answer["items"][0].values()))
    if item.get("error") and item.get("status") != 409:   # 409: a higher position is there already
        raise RuntimeError(f"search refused the visibility position: {item['error']}")
