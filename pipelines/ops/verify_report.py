"""What `cdckit verify` reports per table or document and store (pipelines/ops/verify_tables.py,
pipelines/ops/verify_documents.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

BATCH = 1000
SHOWN = 20


@dataclass
class StoreDiff:
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    different: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: {"missing": 0, "extra": 0, "different": 0})

    def add(self, kind: str, item: Any) -> None:
        self.counts[kind] += 1
        bucket = getattr(self, kind)
        if len(bucket) < SHOWN:
            bucket.append(item)

    @property
    def clean(self) -> bool:
        return not any(self.counts.values())


@dataclass
class TableReport:
    table: str
    rows: int = 0
    stores: dict[str, StoreDiff] = field(default_factory=dict)


def chunks(it: Iterator[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for item in it:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
