"""Redis cache sink: pipelined, server-side compare-and-set on the version (Lua)."""
from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Iterable

import orjson
import redis

from derived.change import Change, DeadLetter
from derived.sinks import visibility_marks
from derived.sinks.store_errors import StoreUnavailable
from derived.sinks.protocol import SinkResult
from derived.sinks.retry import retried
from derived.sinks.cache.keys import key_pattern, render_key
from derived.sinks.cache.lookups import Lookup, LookupValueError, entries
from derived.shape import shape, shaped_field


@dataclass
class CacheTable:
    key_template: str
    format: str = "json"
    ttl_s: int | None = None
    columns: list[str] | None = None
    rename: dict[str, str] = field(default_factory=dict)
    computed: dict[str, Any] = field(default_factory=dict)   # field -> spec (derived/transforms.py)
    remove: tuple[str, ...] = ()                              # fields this store leaves out
    # Nested documents: an equal version replaces the held value (see upsert.lua).
    equal_replaces: bool = False
    lookups: tuple[Lookup, ...] = ()   # sets and sorted sets keyed by a column (lookups.py)

    def version(self, change: Change) -> str:
        return ("=" if self.equal_replaces else "") + change.version.redis()

    def key(self, change: Change) -> str:
        return render_key(self.key_template, change.key, change.doc_id)

    def lookup_entries(self, change: Change) -> str:
        """The scripts' lookup argument: the row's entries as JSON, "" for a table without lookups."""
        if not self.lookups:
            return ""
        return orjson.dumps(entries(self.lookups, change.row or {}, change.doc_id)).decode()

    @property
    def drop_lookups(self) -> str:
        """delete.lua's and forget.lua's lookup argument."""
        return "1" if self.lookups else ""

    def pattern(self) -> str:
        """A SCAN pattern matching every key of this table."""
        return key_pattern(self.key_template)


def _default(value: Any) -> Any:
    return str(value)


def hash_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return orjson.dumps(value, default=_default).decode()


def _upsert_args(t: CacheTable, ch: Change, doc: dict[str, Any], merge: list[str] | None = None,
                 guard: str = "", lookups: str = "") -> list[Any]:
    """upsert.lua's arguments for one key."""
    args = [t.version(ch), t.format, orjson.dumps(doc, default=_default), t.ttl_s or 0, orjson.dumps(merge or []),
            guard, lookups]
    if t.format == "hash":
        args += [x for f, v in doc.items() for x in (f, hash_value(v))]
    return args


# Server states that pass (memory freed, a failover done, a load finished): the batch is re-run
# later. Any other error of one key's command (WRONGTYPE: the key holds something else; a script
# error) is that record's, and dead-lettered like a search rejection.
_PASSING = (redis.exceptions.OutOfMemoryError, redis.exceptions.ReadOnlyError, redis.exceptions.BusyLoadingError,
            redis.exceptions.ClusterDownError, redis.exceptions.TryAgainError, redis.exceptions.MasterDownError)
_PASSING_TEXT = ("OOM", "READONLY", "LOADING", "MASTERDOWN", "BUSY ", "NOREPLICAS", "CLUSTERDOWN", "TRYAGAIN")


def _passing(exc: object) -> bool:
    return isinstance(exc, _PASSING) or (isinstance(exc, Exception) and str(exc).startswith(_PASSING_TEXT))


class RedisCache:
    VERSION_PREFIX = "cdckit:v:"

    def __init__(self, client: redis.Redis, deleted_version_ttl_s: int, retries: int = 5):
        self.r = client
        self.deleted_ttl = deleted_version_ttl_s
        self.retries = retries
        scripts = resources.files("derived.sinks.cache")
        # Each script that writes rows starts with the lookup functions (lookups.lua): one definition.
        prelude = scripts.joinpath("lookups.lua").read_text()

        def script(name: str):
            return self.r.register_script(prelude + scripts.joinpath(name).read_text())

        self._upsert, self._delete = script("upsert.lua"), script("delete.lua")
        self._forget, self._upsert_many = script("forget.lua"), script("upsert_many.lua")

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

    def prepare_visible(self, prefix: str, definition: dict[str, Any] | None = None) -> None:
        """A key needs no place made."""

    def make_readable(self, tables: list[CacheTable]) -> None:
        """A key is readable once written."""

    def publish_visible(self, prefix: str, position: int, tables: list[CacheTable]) -> None:
        visibility_marks.publish_cache(self.r, prefix, position)

    def visible(self, prefix: str) -> int:
        return visibility_marks.read_cache(self.r, prefix)

    def begin_load(self, table: CacheTable) -> None:
        """A key is readable once written: nothing to defer."""

    def end_load(self, table: CacheTable) -> None:
        pass

    def prepare(self, table: CacheTable) -> None:
        """Nothing to create: a key is written where its template says."""

    def mark(self, prefix: str, label: str, definition: dict[str, Any] | None = None) -> None:
        from derived.sinks import markers

        markers.mark_cache(self.r, prefix, label)

    def marked(self, prefix: str) -> bool:
        from derived.sinks import markers

        return not markers.missing(prefix, None, self.r)

    def holds(self, table: CacheTable) -> bool:
        return True

    def apply(self, changes: Iterable[Change], tables: dict[str, CacheTable]) -> SinkResult:
        """Apply reduced changes (at most one per key). Retries connection errors, then raises."""
        return self._retried(self._apply_once, list(changes), tables)

    def _retried(self, call, *args):
        """Connection errors retried with backoff, then StoreUnavailable (the job pauses and re-runs
        the batch: every write here is versioned, so repeating it is harmless)."""
        return retried(call, *args, retries=self.retries, cap=5.0,
                       retry_on=(redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError),
                       give_up=lambda exc: StoreUnavailable(f"redis: {exc}"))

    MERGE_ATTEMPTS = 5

    def _apply_once(self, changes: list[Change], tables: dict[str, CacheTable]) -> SinkResult:
        stats = SinkResult()
        pending = changes
        for _ in range(self.MERGE_ATTEMPTS):
            pending = self._write(pending, tables, stats)
            if not pending:
                return stats
        raise StoreUnavailable(f"redis: {len(pending)} keys kept changing while their TOAST fields were merged")

    # Plain upserts (nothing to merge) go in calls of this many keys: one script call per key costs
    # the client and the server more than the write itself (benchmarks/README.md, bootstrap).
    MANY = 500
    MANY_BYTES = 8 << 20   # and at most about this much payload: a call blocks the server while it runs

    def _write(self, changes: list[Change], tables: dict[str, CacheTable], stats: SinkResult) -> list[Change]:
        """One pipelined round; returns the changes to write again (their key moved meanwhile)."""
        stored = self._stored_json(changes, tables)
        pipe = self.r.pipeline(transaction=False)
        calls: list[Change | list[Change]] = []   # in the pipeline's order: a change, or a call of many
        group: list[Change] = []
        keys_many: list[str] = []
        args_many: list[Any] = []
        size = 0
        for ch in changes:
            t = tables[ch.table]
            keys = self._keys(t.key(ch), t)
            if ch.tombstone:
                self._forget(keys=keys, args=[self.deleted_ttl, t.drop_lookups], client=pipe)
                calls.append(ch)
                continue
            if ch.op == "delete":
                self._delete(keys=keys, args=[t.version(ch), self.deleted_ttl, t.drop_lookups], client=pipe)
                calls.append(ch)
                continue
            try:
                lookups = t.lookup_entries(ch)
            except LookupValueError as exc:   # this row's value, not the store: its letter
                stats.dead.append(DeadLetter(ch.position, None, None, "apply", f"redis: {ch.table}: {exc}"[:1000]))
                continue
            if not ch.unavailable:
                doc = shape(ch.row, t)
                group.append(ch)
                keys_many += keys
                if t.format == "hash":
                    pairs = [x for f, v in doc.items() for x in (f, hash_value(v))]
                    args_many += [t.version(ch), "hash", len(pairs), t.ttl_s or 0, lookups, *pairs]
                    size += sum(len(x) for x in pairs)
                else:
                    payload = orjson.dumps(doc, default=_default)
                    args_many += [t.version(ch), "json", payload, t.ttl_s or 0, lookups]
                    size += len(payload)
                if len(group) >= self.MANY or size >= self.MANY_BYTES:
                    self._upsert_many(keys=keys_many, args=args_many, client=pipe)
                    calls.append(group)
                    group, keys_many, args_many, size = [], [], [], 0
                continue
            else:
                doc = shape(ch.row, t)
                merge = [f for f in (shaped_field(c, t) for c in ch.unavailable) if f is not None]
                guard = ""
                if merge and t.format == "json":
                    held, old = stored.get(keys[0], (None, None))
                    guard = held or ""
                    doc = {**{f: old[f] for f in merge if old and f in old}, **doc}
                self._upsert(keys=keys, args=_upsert_args(t, ch, doc, merge, guard, lookups), client=pipe)
            calls.append(ch)
        if group:
            self._upsert_many(keys=keys_many, args=args_many, client=pipe)
            calls.append(group)
        again: list[Change] = []
        refused: list[Change] = []
        for call, result in zip(calls, pipe.execute(raise_on_error=False)):
            if isinstance(call, Change):
                self._count(call, result, stats, again)
            elif isinstance(result, Exception):
                if not isinstance(result, redis.ResponseError) or _passing(result):
                    raise StoreUnavailable(f"redis: {result}") from result
                refused += call   # refused before any write (an ACL, a counter of another type): each key alone
            else:   # per key: 1, 0 or its error's text
                for ch, one in zip(call, result):
                    if isinstance(one, (bytes, str)):
                        one = redis.ResponseError(one.decode(errors="replace") if isinstance(one, bytes) else one)
                    elif one not in (0, 1):
                        raise StoreUnavailable(f"redis: unexpected reply {one!r} from upsert_many.lua")
                    self._count(ch, one, stats, again)
        if refused:
            again += self._write_alone(refused, tables, stats)
        return again

    def _write_alone(self, changes: list[Change], tables: dict[str, CacheTable], stats: SinkResult) -> list[Change]:
        """Plain upserts whose call of many was refused as a whole: one script call each, so a
        refusal is its own key's letter."""
        pipe = self.r.pipeline(transaction=False)
        for ch in changes:
            t = tables[ch.table]
            args = _upsert_args(t, ch, shape(ch.row, t), lookups=t.lookup_entries(ch))
            self._upsert(keys=self._keys(t.key(ch), t), args=args, client=pipe)
        again: list[Change] = []
        for ch, result in zip(changes, pipe.execute(raise_on_error=False)):
            self._count(ch, result, stats, again)
        return again

    @staticmethod
    def _count(ch: Change, result: Any, stats: SinkResult, again: list[Change]) -> None:
        if isinstance(result, redis.ResponseError) and not _passing(result):
            stats.dead.append(DeadLetter(ch.position, None, None, "apply", f"redis: {result}"[:1000]))
        elif isinstance(result, Exception):
            raise StoreUnavailable(f"redis: {result}") from result
        elif result == 1:
            stats.applied += 1
        elif result == 2:
            again.append(ch)
        else:
            stats.stale += 1

    def _stored_json(self, changes: list[Change], tables: dict[str, CacheTable]
                     ) -> dict[str, tuple[str | None, dict[str, Any] | None]]:
        """Held version and stored document of each JSON key whose change has unchanged TOAST
        fields: they are merged here, exactly (orjson keeps every integer and the shortest
        round-trip of every double), and written only if the held version is still the one read."""
        keys = [tables[ch.table].key(ch) for ch in changes
                if ch.op == "upsert" and ch.unavailable and not ch.tombstone and tables[ch.table].format == "json"]
        if not keys:
            return {}
        pipe = self.r.pipeline(transaction=False)
        for key in keys:
            pipe.get(self.VERSION_PREFIX + key)
            pipe.get(key)
        found = pipe.execute(raise_on_error=False)
        out = {}
        for i, key in enumerate(keys):
            held, raw = found[2 * i], found[2 * i + 1]
            if isinstance(held, Exception) or isinstance(raw, Exception):
                if _passing(held) or _passing(raw):
                    raise StoreUnavailable(f"redis: {held if isinstance(held, Exception) else raw}")
                continue  # the key holds another type: its write fails and is dead-lettered
            try:
                doc = orjson.loads(raw) if raw is not None else None
            except orjson.JSONDecodeError:
                doc = None  # not a document of ours: nothing to merge from
            out[key] = (held.decode() if held is not None else None, doc if isinstance(doc, dict) else None)
        return out

    def truncate(self, change: Change, table: CacheTable) -> int:
        """Delete, at the truncate's version, every key of the table not written after it
        (idempotent: retried as a whole on connection errors)."""
        return self._retried(self._truncate_once, change, table)

    def _truncate_once(self, change: Change, table: CacheTable) -> int:
        deleted = 0
        args = [change.version.redis(), self.deleted_ttl, table.drop_lookups]
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
