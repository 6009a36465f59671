"""What makes `cdckit status` unhealthy besides a stopped part: dead letters no replay has settled,
and a store holding far fewer entries than Postgres has rows. Pure: pipelines/ops/status.py gathers
the numbers, and the running job's store metrics (pipelines/spark/store_health.py) use the same rules.
compose/monitoring/alerts.yml carries the same two rules (keep the thresholds in step).
"""
from __future__ import annotations

from typing import Callable

# A store is far below Postgres when it holds under this share of the table's rows, once the table
# has at least SHORTFALL_MIN_ROWS (reltuples is an estimate, and small tables swing by a few rows).
SHORTFALL_SHARE = 0.9
SHORTFALL_MIN_ROWS = 1_000


def pending_by_table(per_topic: dict[str, int], first_reason: dict[str, str],
                     table_of: Callable[[str], str | None]) -> dict[str, tuple[int, str]]:
    """Unsettled letters per table (a source topic of no configured table by its own name), with the
    first letter's reason."""
    out: dict[str, tuple[int, str]] = {}
    for topic, n in per_topic.items():
        name = table_of(topic) or topic or "(no source topic)"
        count, reason = out.get(name, (0, first_reason.get(topic, "")))
        out[name] = (count + n, reason)
    return out


def letter_problem(table: str, count: int, reason: str) -> str:
    return (f"{table}: {count:,} dead letter(s) no `cdckit dlq replay` has settled (first: {reason[:160]}): "
            "`cdckit dlq list` shows them; fix the cause, then `cdckit dlq replay`")


def far_below(count: int | None, rows: int | None) -> bool:
    return (count is not None and rows is not None and rows >= SHORTFALL_MIN_ROWS
            and count < SHORTFALL_SHARE * rows)


def shortfall_problem(table: str, store: str, count: int, rows: int, exact: bool) -> str:
    return (f"{table}: {store.replace('_', ' ')} {count:,} is far below Postgres' {'' if exact else '~'}{rows:,} rows "
            f"(under {SHORTFALL_SHARE:.0%}): `cdckit dlq list` shows refused records, `cdckit verify --table {table}` "
            "the missing keys")
