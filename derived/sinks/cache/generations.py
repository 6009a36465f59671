"""Redis cache generations: a rebuild fills a spare database, then SWAPDB exchanges it with the
live one in a single atomic command. Readers keep using the live database number and see either
the whole old cache or the whole new one: no window with a missing or half-written key.

SWAPDB needs a standalone server (Redis Cluster has only database 0); that is checked before a
rebuild starts.
"""
from __future__ import annotations

import redis

from derived.sinks.store_errors import GenerationError

MARK = "cdckit:generation"   # in the spare database while a rebuild fills it


def check_spare(live: redis.Redis, spare: redis.Redis, live_db: int, spare_db: int, resume: bool) -> None:
    """The spare database must be empty, or hold this same rebuild's partial work when resuming."""
    if live_db == spare_db:
        raise GenerationError("redis.rebuild_db must differ from the live database")
    try:
        live.execute_command("SWAPDB", live_db, live_db)   # a no-op that fails where SWAPDB is unsupported
    except redis.ResponseError as exc:
        raise GenerationError(f"redis: SWAPDB is not available ({exc}); a cache rebuild needs a standalone "
                              "server with more than one database") from None
    size = spare.dbsize()
    if size and not (resume and spare.exists(MARK)):
        raise GenerationError(f"redis database {spare_db} (redis.rebuild_db) holds {size} keys that are not "
                              "a cdckit rebuild; empty it or choose another redis.rebuild_db")


def begin(spare: redis.Redis, label: str) -> None:
    spare.set(MARK, label)


def switch(live: redis.Redis, spare: redis.Redis, live_db: int, spare_db: int, label: str) -> None:
    """Atomically exchange the databases. Idempotent: the marker travels with the new data, so a
    rerun after a crash right after SWAPDB finds this rebuild live already and does not swap back
    (which would serve the old generation and then flush the new one). `finish` removes it."""
    if _holds(live, label):
        return
    if not _holds(spare, label):
        raise GenerationError(f"redis: neither database {live_db} nor {spare_db} holds rebuild {label}")
    live.execute_command("SWAPDB", live_db, spare_db)


def carry_over(live: redis.Redis, spare: redis.Redis, spare_db: int, patterns: list[str], keys: list[str] = ()
               ) -> int:
    """Copy the keys matching `patterns` (with their version keys, TTLs kept), and `keys`, into the spare
    database: what a rebuild does not fill itself (nested documents, written by their own query)
    must be there when it becomes the live one. Run with every writer of those keys paused."""
    from derived.sinks.cache.sink import RedisCache

    for pattern in patterns:  # a rerun after a partial copy starts clean: no key of an earlier copy stays
        for glob in (pattern, RedisCache.VERSION_PREFIX + pattern):
            stale = list(spare.scan_iter(match=glob, count=1000))
            for i in range(0, len(stale), 1000):
                spare.delete(*stale[i:i + 1000])
    copied = 0
    for pattern in patterns:
        for glob in (pattern, RedisCache.VERSION_PREFIX + pattern):
            pipe = live.pipeline(transaction=False)
            for key in live.scan_iter(match=glob, count=1000):
                if glob is pattern and key.startswith(b"cdckit:"):
                    continue
                pipe.copy(key, key, destination_db=spare_db, replace=True)
                copied += 1
                if len(pipe) >= 1000:
                    pipe.execute()
            pipe.execute()
    for key in keys:
        copied += int(bool(live.copy(key, key, destination_db=spare_db, replace=True)))
    return copied


def switched(live: redis.Redis, label: str) -> bool:
    """The live database holds this rebuild already (a rerun after the swap)."""
    return _holds(live, label)


def finish(live: redis.Redis, label: str) -> None:
    """The switch is recorded: the marker of this rebuild leaves the live database."""
    if _holds(live, label):
        live.delete(MARK)


def _holds(client: redis.Redis, label: str) -> bool:
    held = client.get(MARK)
    return held is not None and held.decode() == label


def discard(live: redis.Redis, spare: redis.Redis, label: str) -> bool:
    """A rebuild that did not switch: its spare database is emptied, only while it holds this
    rebuild and the live one does not (never the live generation; a rerun finds nothing to do)."""
    if _holds(live, label) or not _holds(spare, label):
        return False
    spare.flushdb()
    return True


def drop_old(spare: redis.Redis) -> None:
    """After the switch the spare database holds the old generation."""
    spare.flushdb()


class CacheGenerations:
    """A rebuild's calls on the cache's generations (the functions above), with the live and the
    spare database's clients (made by pipelines/apply/stores.cache_generations)."""

    def __init__(self, live: redis.Redis, spare: redis.Redis, live_db: int, spare_db: int):
        self.live, self.spare, self.live_db, self.spare_db = live, spare, live_db, spare_db

    def check_spare(self, resume: bool) -> None:
        check_spare(self.live, self.spare, self.live_db, self.spare_db, resume)

    def begin(self, label: str) -> None:
        begin(self.spare, label)

    def mark(self, prefix: str, label: str) -> None:
        """The store marker into the database about to be swapped in."""
        from derived.sinks import markers

        markers.mark_cache(self.spare, prefix, label)

    def carry_over(self, patterns: list[str], keys: list[str] = ()) -> int:
        return carry_over(self.live, self.spare, self.spare_db, patterns, keys)

    def carry_visible(self, prefix: str) -> None:
        """At least the live database's visibility position into the one about to be swapped in."""
        from derived.sinks import visibility_marks

        visibility_marks.carry_cache(self.live, self.spare, prefix)

    def switched(self, label: str) -> bool:
        return switched(self.live, label)

    def switch(self, label: str) -> None:
        switch(self.live, self.spare, self.live_db, self.spare_db, label)

    def finish(self, label: str) -> None:
        finish(self.live, label)

    def discard(self, label: str) -> bool:
        return discard(self.live, self.spare, label)

    def drop_old(self) -> None:
        drop_old(self.spare)
