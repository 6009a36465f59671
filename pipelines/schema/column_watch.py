"""The running job's watch on its tables' columns (driver side, between batches).

Each check reads the catalog for every synced table (one query per table, at most every
`interval_s`, at every batch when a table's policy is `stop`), compares with the columns last seen (pipelines/state/schema.py: kept beside the
checkpoint, so a change made while the job was down is noticed at the next start), and acts on
a change as the table's `on_schema_change` says (pipelines/schema/plan.py): extends the live
index mapping, asks Debezium for an incremental snapshot of the table (every row re-read at a
version newer than its last change), starts a rebuild once that re-read has been emitted, or stops
the job. The columns' types are also what documents are rendered with (their Postgres types).
"""
from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Callable, Protocol

from connectors.table_shape import Column, diff
from pipelines.config import Config
from pipelines.errors import SchemaChangeError
from pipelines.schema.plan import config_edits, plan
from pipelines.state.schema import PendingWork, SchemaState

log = logging.getLogger("cdckit.schema")
# Without Debezium's COMPLETED notification (its sink channel off, or an older Debezium): no new
# snapshot window for this long after the re-read began is taken as every row emitted.
QUIET_S = 10.0
NO_WINDOW_S = 120.0  # no window at all this long after the signal: signal again (once); twice as long: give up


class SchemaActions(Protocol):
    def columns(self, tables: list[str]) -> dict[str, list[Column]]: ...
    def signal_resnapshot(self, table: str) -> str: ...
    def windows(self) -> int: ...
    def completed(self) -> set[str]: ...
    def extend_mapping(self, table: str, fields: dict[str, str]) -> None: ...
    def start_rebuild(self, stores: list[str], table: str) -> None: ...
    def rebuild_finished(self, since: float) -> bool: ...


class SchemaWatch:
    def __init__(self, state: SchemaState, actions: SchemaActions, interval_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic,
                 same_mapping: Callable[[str, str], bool] = lambda a, b: a == b,
                 wall: Callable[[], float] = time.time):
        self.state, self.actions, self.interval_s, self.clock, self.wall = state, actions, interval_s, clock, wall
        self.same_mapping = same_mapping
        self.last_check: float | None = None
        self.types: dict[str, dict[str, str]] = {}
        self._windows: tuple[int, float] | None = None  # (count, when it last changed)

    def check(self, config: Config) -> dict[str, dict[str, str]]:
        """Column types per table (name -> format_type), after acting on any change. Raises
        SchemaChangeError under `on_schema_change: stop`."""
        with self.state.editing():
            return self._check(config)

    def _check(self, config: Config) -> dict[str, dict[str, str]]:
        now = self.clock()
        # A table under `stop` is read at every batch, before it is applied: its changes are in
        # Kafka after their DDL committed, so the catalog read now shows any DDL they follow; a
        # rate-limited check let a write made just after a DDL through in the new shape.
        every_batch = any(t.on_schema_change == "stop" for t in config.tables)
        if not every_batch and self.last_check is not None and now - self.last_check < self.interval_s:
            return self.types
        self.last_check = now
        tables = {t.name: t for t in config.tables}
        seen = self.actions.columns(list(tables))
        shapes, pending = self.state.shapes(), self.state.pending()
        stop: str | None = None
        for name, columns in seen.items():
            if not columns:
                continue  # a table gone from the database: the table checks report it at the next start
            before = shapes.get(name)
            shapes[name] = columns
            if before is None:
                continue  # first sight: this is the shape the stores were filled with
            changes = diff(name, before, columns)
            table = tables[name]
            step = plan(name, changes, table.on_schema_change, table.columns,
                        lambda c: table.rename.get(c, c), self.same_mapping) if changes else None
            if step is None:
                continue
            log.warning("schema change: %s", step.describe())
            what = step.what
            if step.stop:
                pending.append(PendingWork(name, f"{name}: {what}", stopped=True))
                stop = stop or f"{name}: {step.stop}"
                continue
            if table.documents_only:
                # No store of its own: the documents that read it follow its types themselves
                # (documents_query: the drift check); only the re-read of its rows is kept.
                step = replace(step, extend_mapping=[], rebuild=[])
            if step.extend_mapping:
                types = {c.name: c.type for c in columns}
                renamed = {table.rename.get(c, c): c for c in types}
                self.actions.extend_mapping(name, {f: types[renamed.get(f, f)] for f in step.extend_mapping
                                                   if renamed.get(f, f) in types})
            work = PendingWork(name, f"{name}: {what}", rebuild=list(step.rebuild), since=self.wall())
            if step.resnapshot:
                work.windows_at_request = self.actions.windows()
                work.signal_id = self.actions.signal_resnapshot(name)
                work.resnapshot = "requested"
                pending.append(work)
            elif work.rebuild:
                self.actions.start_rebuild(work.rebuild, name)
                work.rebuild, work.rebuild_started_at = [], time.time()
                pending.append(work)
        pending = self._advance(pending, now)
        self.state.save_shapes(shapes)
        self.state.save_pending(pending)
        self.types = {name: {c.name: c.type for c in cols} for name, cols in shapes.items() if name in tables}
        if stop:
            raise SchemaChangeError(stop)
        return self.types

    def config_edited(self, old: Config, new: Config) -> None:
        """A config edit the running job picked up that leaves stored documents in the old shape
        (columns, rename, key, mappings, index, search, numeric_as_number, redis_key, redis_format, and
        the shared search.index_settings / deleted_version_ttl_s): the affected stores are
        rebuilt for the table (`evolve`, `rebuild`), or the job stops naming the command (`stop`)."""
        with self.state.editing():
            self._config_edited(old, new)

    def _config_edited(self, old: Config, new: Config) -> None:
        before = {t.name: t for t in old.tables}
        pending, stop = self.state.pending(), None
        for table in new.tables:
            if table.name not in before or table.documents_only:
                continue  # a new table: `cdckit snapshot add` fills it; a documents-only one has no store
            edited, stores = config_edits(before[table.name], table, old.search, new.search)
            if not stores:
                continue
            what = f"{table.name}: config edit of {', '.join(edited)}"
            command = f"`cdckit rebuild {'all' if len(stores) == 2 else stores[0]} --table {table.name}`"
            log.warning("%s leaves stored documents in the old shape", what)
            if table.on_schema_change == "stop":
                pending.append(PendingWork(table.name, what, stopped=True))
                stop = stop or (f"{what} leaves stored documents in the old shape; on_schema_change is 'stop': "
                                f"run {command}, then start the job again")
                continue
            self.actions.start_rebuild(stores, table.name)
            pending.append(PendingWork(table.name, what, rebuild_started_at=time.time()))
        self.state.save_pending(pending)
        if stop:
            raise SchemaChangeError(stop)

    def _advance(self, pending: list[PendingWork], now: float) -> list[PendingWork]:
        """Re-reads Debezium says completed, or whose snapshot windows went quiet, are done, and
        their rebuilds start then;
        a started rebuild is done when the rebuild says so."""
        pending = [w for w in pending
                   if w.rebuild_started_at is None or not self.actions.rebuild_finished(w.rebuild_started_at)]
        if not any(w.resnapshot == "requested" for w in pending):
            return pending
        count = self.actions.windows()
        ended = self.actions.completed()   # Debezium's COMPLETED notifications, by signal id
        if self._windows is None or self._windows[0] != count:
            self._windows = (count, now)
        quiet = now - self._windows[1]
        left = []
        for w in pending:
            silent = self.wall() - w.since  # no window since the request: lost signal, or nothing to read
            completed = w.signal_id in ended
            if w.resnapshot == "requested" and not completed and count == w.windows_at_request \
                    and silent > 2 * NO_WINDOW_S:
                w.resnapshot = "done"
                log.warning("schema change: %s: Debezium opened no snapshot window for the re-read in %.0f s "
                            "(an empty table?); taken as done: `cdckit verify` tells", w.what, silent)
            elif w.resnapshot == "requested" and not completed and count == w.windows_at_request \
                    and silent > NO_WINDOW_S and not w.resignalled:
                w.signal_id, w.resignalled = self.actions.signal_resnapshot(w.table), True
                log.warning("schema change: %s: no snapshot window yet; signalled the re-read again", w.what)
            if w.resnapshot == "requested" and (completed or (count > w.windows_at_request and quiet >= QUIET_S)):
                w.resnapshot = "done"
                log.warning("schema change: %s: every row re-read%s", w.what,
                            " (Debezium: incremental snapshot completed)" if completed else "")
                if w.rebuild:
                    self.actions.start_rebuild(w.rebuild, w.table)
                    w.rebuild, w.rebuild_started_at = [], time.time()
            if w.open:
                left.append(w)
        return left
