"""Whether a rebuild may switch: every dead-lettered record of its replay is a row the fresh
generation lacks, so the switch would hand readers a generation missing rows (issue 37: an alias
moved onto a near-empty index with 48,981 refusals). It switches only when the letters are no more
than the operator accepted (`--accept-dead-letters N`, default 0).

Counted, each where the replay recorded it: the bulk (undecodable records and store refusals),
the catch-up (by the rebuild, or the live pipeline's replay of the stretch), the live pipeline's
dual writes after that stretch (refusals of the fresh generation only), and the documents' replay.
"""
from __future__ import annotations

from typing import Any


def count_letters(summary: dict[str, Any], live_report: dict[str, Any] | None = None) -> dict[str, int]:
    """Dead letters per part of the replay. `live_report`: the live pipeline's report of its
    catch-up (state/rebuild_state.live_caught_up), read again at the verdict for its later dual writes."""
    catchup = summary.get("catchup") or {}
    dual = (live_report or catchup).get("dual_write_dead_letters", 0) if catchup.get("by") == "live pipeline" else 0
    counts = {"bulk": (summary.get("bulk") or {}).get("dead_letters", 0), "catch-up": catchup.get("dead_letters", 0),
              "dual writes": dual, "documents": (summary.get("documents") or {}).get("dead_letters", 0)}
    return {k: int(v or 0) for k, v in counts.items()}


def verdict(summary: dict[str, Any], live_report: dict[str, Any] | None, accepted: int) -> dict[str, Any]:
    """The verdict as the rebuild state keeps it: {count, by, accepted, switch}."""
    by = count_letters(summary, live_report)
    count = sum(by.values())
    return {"count": count, "by": {k: v for k, v in by.items() if v}, "accepted": accepted, "switch": count <= accepted}


def refusal(rebuild_id: str, verdict: dict[str, Any], again: str) -> str:
    """The one line of a refused switch: the count, what became of each generation, what to do."""
    parts = ", ".join(f"{k} {v:,}" for k, v in verdict["by"].items())
    return (f"rebuild {rebuild_id} did not switch: {verdict['count']:,} record(s) of its replay were dead-lettered "
            f"({parts}), more than the {verdict['accepted']:,} accepted; readers keep the old generation and the fresh "
            f"one was dropped. `cdckit dlq list` shows why; fix the cause and run `{again}` again, or switch anyway "
            f"with `{again} --accept-dead-letters {verdict['count']}`")


def accepted_note(verdict: dict[str, Any]) -> str | None:
    """Said after a switch that accepted letters: they are still failures, for `dlq list|replay`."""
    if not verdict or not verdict.get("count"):
        return None
    return (f"switched with {verdict['count']:,} dead-lettered records accepted (--accept-dead-letters "
            f"{verdict['accepted']:,}): the new generation lacks them; `cdckit dlq list` shows them, "
            "`cdckit dlq replay` applies them after a fix")
