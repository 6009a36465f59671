"""Redis cache sink: pipelined, server-side compare-and-set on the version (Lua)."""
from __future__ import annotations

import string
import time
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Iterable

import orjson
import redis

from derived.change import Change
from derived.errors import StoreUnavailable
from derived.shape import shape, shaped_field


@dataclass
class CacheTable:
    key_template: str
    format: str = "json"
    ttl_s: int | None = None
    columns: list[str] | None = None
    rename: dict[str, str] = field(default_factory=dict)

    def key(self, change: Change) -> str:
        return self.key_template.format(**change.key, _id=change.doc_id)

    def pattern(self) -> str:
        """A SCAN pattern matching every key of this table."""
        parts = string.Formatter().parse(self.key_template)
        return "".join(_glob_escape(lit) + ("*" if field is not None else "") for lit, field, _, _ in parts)


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def _default(value: Any) -> Any:
    return str(value)


def _hash_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return orjson.dumps(value, default=_default).decode()


@dataclass
class ApplyStats:
    applied: int = 0
    stale: int = 0


class RedisCache:
    VERSION_PREFIX = "cdckit:v:"

    def __init__(self, client: redis.Redis, deleted_version_ttl_s: int, retries: int = 5):
        self.r = client
        self.deleted_ttl = deleted_version_ttl_s
        self.retries = retries
        scripts = resources.files("derived")
        self._upsert = self.r.register_script(scripts.joinpath("cache_upsert.lua").read_text())
        self._delete = self.r.register_script(scripts.joinpath("cache_delete.lua").read_text())

    COUNT_PREFIX = "cdckit:count:"

    def _keys(self, data_key: str, table: CacheTable) -> list[str]:
        return [data_key, self.VERSION_PREFIX + data_key, self._count_key(table)]

    def _count_key(self, table: CacheTable) -> str:
        # Counted per key template: an O(1) estimate for `status` (keys with a TTL expire uncounted).
        return f"{self.COUNT_PREFIX}{table.key_template}"

    def count(self, table: CacheTable, exact: bool = False) -> int:
        if not exact:
            return int(self.r.get(self._count_key(table)) or 0)
        pattern = table.pattern()
        return sum(1 for k in self.r.scan_iter(match=pattern, count=1000) if not k.startswith(b"cdckit:"))

    def apply(self, changes: Iterable[Change], tables: dict[str, CacheTable]) -> ApplyStats:
        """Apply reduced changes (at most one per key). Retries connection errors, then raises."""
        changes = list(changes)
        delay = 0.2
        for attempt in range(self.retries + 1):
            try:
                return self._apply_once(changes, tables)
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError) as exc:
                if attempt == self.retries:
                    raise StoreUnavailable(f"redis: {exc}") from exc
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
        raise AssertionError("unreachable")

    def _apply_once(self, changes: list[Change], tables: dict[str, CacheTable]) -> ApplyStats:
        stats = ApplyStats()
        pipe = self.r.pipeline(transaction=False)
        for ch in changes:
            t = tables[ch.table]
            keys = self._keys(t.key(ch), t)
            if ch.op == "delete":
                self._delete(keys=keys, args=[ch.version.redis(), self.deleted_ttl], client=pipe)
            else:
                doc = shape(ch.row, t)
                merge = [f for f in (shaped_field(c, t) for c in ch.unavailable) if f is not None]
                args = [ch.version.redis(), t.format, orjson.dumps(doc, default=_default), t.ttl_s or 0,
                        orjson.dumps(merge)]
                if t.format == "hash":
                    args += [x for f, v in doc.items() for x in (f, _hash_value(v))]
                self._upsert(keys=keys, args=args, client=pipe)
        for result in pipe.execute():
            if result == 1:
                stats.applied += 1
            else:
                stats.stale += 1
        return stats

    def truncate(self, change: Change, table: CacheTable) -> int:
        """Delete, at the truncate's version, every key of the table not written after it."""
        deleted = 0
        args = [change.version.redis(), self.deleted_ttl]
        pipe = self.r.pipeline(transaction=False)
        for key in self.r.scan_iter(match=table.pattern(), count=1000):
            key = key.decode() if isinstance(key, bytes) else key
            if key.startswith("cdckit:"):
                continue
            self._delete(keys=[key, self.VERSION_PREFIX + key, self._count_key(table)], args=args, client=pipe)
            if len(pipe) >= 1000:
                deleted += sum(pipe.execute())
        deleted += sum(pipe.execute())
        return deleted

    def read(self, key: str, table: CacheTable) -> dict[str, Any] | None:
        data_key = key
        if table.format == "json":
            raw = self.r.get(data_key)
            return None if raw is None else orjson.loads(raw)
        raw = self.r.hgetall(data_key)
        return {k.decode(): v.decode() for k, v in raw.items()} or None
