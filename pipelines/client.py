"""Read-your-writes for applications: wait until your own commit is visible in the search index or
the cache. Needs only redis-py and requests (no Spark, nothing else of cdckit's pipeline).

    token = commit_token(conn)            # right after conn.commit(), on the same connection
    wait_visible(token, store="search", watermarks=Watermarks.connect(redis_url=..., search_url=...))

The running job publishes, per store, the WAL position up to which every committed change is in
that store (pipelines/streaming/visibility_publisher.py; connectors/visibility_watermark.py says why that holds); a commit is
visible once that position reaches the token. Both stores get the same position.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from connectors.visibility_watermark import format_lsn, parse_lsn
from derived.sinks import visibility_marks as published
STORES = ("search", "cache", "both")


class NotVisible(TimeoutError):
    """The commit did not become visible within the timeout (the job stopped, or is far behind)."""

    def __init__(self, token: int, store: str, timeout_s: float, position: int, error: str | None = None):
        self.token, self.store, self.timeout_s, self.position = token, store, timeout_s, position
        held = "the stores hold" if store == "both" else f"the {store} holds"
        why = f"reading the position failed: {error}" if error else "is `cdckit run` running?"
        super().__init__(f"commit at {format_lsn(token)} not visible in {store} within {timeout_s:g} s "
                         f"({held} changes up to {format_lsn(position)}; {why})")


def commit_token(conn: Any) -> int:
    """The WAL position after your commit: call it on the connection that committed, after the
    commit (psycopg 3 or psycopg2). Everything that session committed lies below it. Refused inside
    an open transaction (its changes are not committed yet); a transaction this opens is ended.

    The insert position, not `pg_current_wal_lsn()` (the write position): under
    `synchronous_commit = off` COMMIT returns once its record is inserted, before it is written,
    so the write position can still be below the session's own commit."""
    idle = _transaction_idle(conn)
    if idle is False:
        raise ValueError("commit_token: the connection is inside a transaction: commit first")
    cur = conn.cursor()
    try:
        cur.execute("SELECT pg_current_wal_insert_lsn()::text")
        token = parse_lsn(cur.fetchone()[0])
    finally:
        cur.close()
    if idle and not getattr(conn, "autocommit", False):
        conn.rollback()   # the SELECT opened a transaction: do not leave it idle in transaction
    return token


def _transaction_idle(conn: Any) -> bool | None:
    """Whether no transaction is open (None: a driver this does not know)."""
    info = getattr(conn, "info", None)
    status = getattr(info, "transaction_status", None)     # psycopg 3
    if status is None and hasattr(conn, "get_transaction_status"):
        status = conn.get_transaction_status()              # psycopg2
    return None if status is None else int(status) == 0   # IDLE is 0 in both


@dataclass
class Watermarks:
    """Reads the stores' published positions. `redis`: a redis-py client on the live database;
    `search_url`: the engine's base URL (credentials in it or in `auth`); `prefix`: the config's
    `topic_prefix`."""

    redis: Any = None
    search_url: str | None = None
    prefix: str = "cdc"
    auth: tuple[str, str] | None = None
    verify: bool | str = True

    @classmethod
    def connect(cls, redis_url: str | None = None, search_url: str | None = None, prefix: str = "cdc",
                **kwargs: Any) -> "Watermarks":
        client = None
        if redis_url:
            import redis

            client = redis.Redis.from_url(redis_url)
        return cls(client, search_url, prefix, **kwargs)

    def position(self, store: str) -> int:
        if store == "cache":
            if self.redis is None:
                raise ValueError("no redis client given: cannot read the cache's position")
            return published.read_cache(self.redis, self.prefix)
        if store == "search":
            if not self.search_url:
                raise ValueError("no search_url given: cannot read the search index's position")
            import requests

            url = f"{self.search_url.rstrip('/')}/{published.search_index(self.prefix)}/_doc/{published.SEARCH_DOC}"
            got = requests.get(url, auth=self.auth, verify=self.verify, timeout=5)
            if got.status_code in (404, 503):   # nothing published yet (or its index not yet allocated)
                return 0
            got.raise_for_status()
            return int(got.json().get("_source", {}).get("lsn", 0))
        return min(self.position("search"), self.position("cache"))


def wait_visible(token: int | str, store: str = "both", timeout: float = 10.0, watermarks: Watermarks | None = None,
                 read: Callable[[str], int] | None = None) -> float:
    """Block until the commit behind `token` is visible in `store` ("search", "cache" or "both");
    returns the seconds waited, or raises NotVisible after `timeout`. Polls every 10 ms at first,
    backing off to 200 ms. `read` (store -> position) replaces `watermarks`, e.g. for an HTTP check."""
    if store not in STORES:
        raise ValueError(f"store must be one of {', '.join(STORES)}, not {store!r}")
    if read is None:
        if watermarks is None:
            raise ValueError("give watermarks (Watermarks.connect(...)) or read")
        read = watermarks.position
    lsn = parse_lsn(token)
    started = time.monotonic()
    pause, position, error = 0.01, 0, None
    while True:
        try:   # a store restarting answers again within the timeout, or the error is reported
            position, error = read(store), None
        except Exception as exc:  # noqa: BLE001 - redis-py's and requests' errors alike
            error = f"{type(exc).__name__}: {str(exc)[:200]}"
        if error is None and position >= lsn:
            return time.monotonic() - started
        left = timeout - (time.monotonic() - started)
        if left <= 0:
            raise NotVisible(lsn, store, timeout, position, error)
        time.sleep(min(pause, left))
        pause = min(pause * 1.5, 0.2)
