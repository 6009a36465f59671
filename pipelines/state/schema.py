"""Beside the checkpoint: each synced table's columns as the job last saw them (so a change made
while the job was down is still noticed at its next start), and the schema work in progress, which
`status` shows until it is done."""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator

from connectors.table_shape import Column
from pipelines.state.checkpoint import read_json, write_json
from pipelines.state.locks import file_lock


@dataclass
class PendingWork:
    table: str
    what: str                                   # the changes, described
    resnapshot: str = "none"                    # none | requested | done
    rebuild: list[str] = field(default_factory=list)  # stores still to rebuild after the re-read
    stopped: bool = False                       # on_schema_change: stop; the job stopped for it
    since: float = field(default_factory=time.time)
    signal_id: str | None = None
    windows_at_request: int = 0
    rebuild_started_at: float | None = None     # the rebuild the job started (until it is done)
    resignalled: bool = False                   # the re-read's signal was sent a second time

    @property
    def open(self) -> bool:
        """Still to show: a re-read under way, a rebuild running, or a stop waiting for its command."""
        return self.resnapshot == "requested" or self.stopped or self.rebuild_started_at is not None

    def line(self) -> str:
        steps = []
        if self.stopped and "config edit" in self.what:
            steps.append("the job stopped for it (on_schema_change: stop): run "
                         f"`cdckit rebuild all --table {self.table}`")
        elif self.stopped:
            steps.append("the job stopped for it (on_schema_change: stop): run "
                         f"`cdckit snapshot resync {self.table}`")
        if self.resnapshot == "requested":
            steps.append("re-reading every row (incremental snapshot)")
        if self.rebuild:
            steps.append(f"rebuild of {' and '.join(self.rebuild)} to follow")
        if self.rebuild_started_at is not None:
            steps.append("rebuild running (see the rebuild line)")
        return f"{self.what}: {'; '.join(steps) or 'done'}"


class SchemaState:
    def __init__(self, checkpoint_dir: Path):
        self.folder = Path(checkpoint_dir) / "schema"

    def shapes(self) -> dict[str, list[Column]]:
        raw = read_json(self.folder / "shapes.json", {}) or {}
        return {t: [Column.from_json(c) for c in cols] for t, cols in raw.items()}

    def save_shapes(self, shapes: dict[str, list[Column]]) -> None:
        write_json(self.folder / "shapes.json", {t: [c.as_json() for c in cols] for t, cols in shapes.items()})

    def first_sight(self, seen: dict[str, list[Column]]) -> None:
        """The shapes of tables not seen before: taken before their snapshot, so a change made
        between it and the job's first check is a change, not the first sight."""
        shapes = self.shapes()
        new = {t: cols for t, cols in seen.items() if cols and t not in shapes}
        if new:
            self.save_shapes({**shapes, **new})

    @contextmanager
    def editing(self) -> Iterator[None]:
        """Held around a read-modify-write of the pending work: the job's watch and `snapshot resync`
        both edit it, and an unlocked save of an older copy brought settled work back for good."""
        with file_lock(self.folder / "pending.lock"):
            yield

    def pending(self) -> list[PendingWork]:
        return [PendingWork(**p) for p in read_json(self.folder / "pending.json", []) or []]

    def save_pending(self, work: list[PendingWork]) -> None:
        write_json(self.folder / "pending.json", [asdict(w) for w in work])
