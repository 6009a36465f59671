"""What every sink promises, so the pipeline writes the search index, the Redis cache and the
in-memory stores of tests alike.

Writes are versioned (derived/change.py): a change not newer than what a store holds is `stale`,
never an error, so any batch can be applied again. A change the store refuses for itself (a
mapping conflict, a key of another type) is a dead letter in the result; a store that does not
answer raises StoreUnavailable (derived/sinks/store_errors.py) after its retries (derived/sinks/retry.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Protocol

from derived.change import Change, DeadLetter


@dataclass
class SinkResult:
    """What one `apply` did."""

    applied: int = 0
    stale: int = 0
    dead: list[DeadLetter] = field(default_factory=list)


class Sink(Protocol):
    """A derived store. `table` is the store's own per-table settings (SearchTable, CacheTable)."""

    def prepare(self, table: Any) -> None:
        """Make the table writable (e.g. its first index behind the alias); idempotent."""

    def apply(self, changes: Iterable[Change], tables: dict[str, Any]) -> SinkResult:
        """Reduced changes (at most one per key), each of a table in `tables`."""

    def truncate(self, change: Change, table: Any) -> int:
        """Remove every entry of the table not written after the truncate's version; returns how many."""

    def mark(self, prefix: str, label: str, definition: dict[str, Any] | None = None) -> None:
        """Write the pipeline's marker: the store is known complete (derived/sinks/markers.py)."""

    def marked(self, prefix: str) -> bool:
        """The marker is there (gone: the store lost its data)."""

    def holds(self, table: Any) -> bool:
        """The table exists in the store (an index behind its alias; a cache always holds its tables)."""

    def prepare_visible(self, prefix: str, definition: dict[str, Any] | None = None) -> None:
        """Make a place for the pipeline's visibility position (derived/sinks/visibility_marks.py)."""

    def make_readable(self, tables: list[Any]) -> None:
        """What was written to these tables is made readable now (the index refreshed; a store
        whose writes are readable at once does nothing)."""

    def publish_visible(self, prefix: str, position: int, tables: list[Any]) -> None:
        """Readers of these tables may rely on every change up to `position`: what was written is
        made readable (the index refreshed), then the position is published; it only moves forward."""

    def visible(self, prefix: str) -> int:
        """The published position (0: none yet)."""

    def begin_load(self, table: Any) -> None:
        """A bulk load of the table begins (the bootstrap's snapshot): the store may defer work
        readers need (the index's refreshes) until end_load."""

    def end_load(self, table: Any) -> None:
        """The load ended (or was cut short by a crash: the next start calls it): the table is as
        readable as configured again."""

    def count(self, table: Any, exact: bool = False) -> int | None:
        """How many entries the table holds (None: the store does not hold it); without `exact` an
        estimate cheap enough for every `status`."""


class DeadLetterSink(Protocol):
    """Where dead letters go: the dead-letter topic, or a collection (tests, `dlq replay`)."""

    def write(self, letters: Iterable[DeadLetter]) -> int:
        """Keep the letters; returns how many were written."""
