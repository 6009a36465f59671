"""What applying a batch did: counts per store, the truncates deferred to the driver, freshness."""
from __future__ import annotations

from dataclasses import dataclass, field, fields

from derived.change import Version
from derived.reduce import merge_cuts
from pipelines.apply.letter_kinds import merge as merge_kinds


@dataclass
class BatchStats:
    records: int = 0
    tombstones: int = 0
    dead_letters: int = 0
    search_applied: int = 0
    search_stale: int = 0
    cache_applied: int = 0
    cache_stale: int = 0
    truncates: int = 0
    truncate_cuts: dict[str, Version] = field(default_factory=dict)  # deferred truncates: table -> cut
    snapshot_reads: int = 0
    snapshot_last_lsn: int = 0          # set when the batch held the snapshot's final record
    newest_source_ts_ms: int | None = None
    visible_ms: list[int] = field(default_factory=list)  # sampled commit-to-applied times of streamed changes
    filtered_out: int = 0               # upserts a store's row filter turned into deletes (per store)
    toast_reread: int = 0               # changes whose unchanged TOAST columns were read from Postgres
    fresh_dead_letters: int = 0         # of dead_letters: a rebuild's fresh generation's own refusals
    # The first letter of each kind (pipelines/apply/letter_kinds.py), for the driver's WARNING lines.
    letter_kinds: list[dict] = field(default_factory=list)


def add_stats(total: BatchStats, s: BatchStats) -> None:
    """Sum `s` into `total` (the newest timestamp and the snapshot marker by maximum)."""
    for f in fields(BatchStats):
        name = f.name
        a, b = getattr(total, name), getattr(s, name)
        if name == "visible_ms":
            merged = (a or []) + (b or [])
            setattr(total, name, merged[::max(1, len(merged) // 1000)])
        elif name == "newest_source_ts_ms":
            setattr(total, name, max(x for x in (a, b) if x is not None) if (a or b) else None)
        elif name == "snapshot_last_lsn":
            setattr(total, name, max(a, b))
        elif name == "truncate_cuts":
            setattr(total, name, merge_cuts(a, b))
        elif name == "letter_kinds":
            setattr(total, name, merge_kinds(a or [], b or []))
        else:
            setattr(total, name, a + b)
