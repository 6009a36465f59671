"""The first dead letter of each kind, for a WARNING line the moment the driver learns of it.

A batch summary says "48,981 DEAD LETTERS" once the batch is over; what an operator needs at once
is why: one line per kind (table, stage, reason), not one per letter. Tasks sample the first
letter of each kind they write (`sample`), the stats carry the samples to the driver, and
`FirstLetters` there says which kinds are new to this process. A kind's reason is the letter's with
the parts that name one record (quoted ids and values, numbers) blanked, so 48,981 refusals of one
mapping conflict are one kind.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Iterable

PER_TASK = 20          # samples a task sends (kinds beyond these are still counted and written)
REMEMBERED = 1_000     # kinds a process remembers having logged
REASON_CHARS = 300

_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_NUMBER = re.compile(r"\d+")


def kind_reason(reason: str) -> str:
    """The reason without what names one record: "document '42' ... value: 'x'" -> "document '…' ...'…'"."""
    return _NUMBER.sub("N", _QUOTED.sub("'…'", reason))[:REASON_CHARS]


def kind_of(sample: dict[str, Any]) -> tuple[str, str, str]:
    return sample["topic"], sample["stage"], kind_reason(sample["reason"])


def sample(letters: Iterable[Any], limit: int = PER_TASK) -> list[dict[str, Any]]:
    """The first letter (derived.change.DeadLetter) of each kind, as plain dicts."""
    return merge([], [{"topic": d.position.topic, "partition": d.position.partition, "offset": d.position.offset,
                       "stage": d.stage, "reason": d.reason[:REASON_CHARS]} for d in letters], limit)


def merge(a: list[dict[str, Any]], b: list[dict[str, Any]], limit: int = PER_TASK) -> list[dict[str, Any]]:
    """`a` then `b`'s samples of kinds `a` lacks, at most `limit`."""
    out, seen = list(a[:limit]), {kind_of(s) for s in a}
    for s in b:
        if len(out) >= limit:
            break
        if kind_of(s) not in seen:
            seen.add(kind_of(s))
            out.append(s)
    return out


class FirstLetters:
    """The kinds this process has logged; `lines` gives a WARNING line for each new one."""

    def __init__(self, remembered: int = REMEMBERED):
        self.seen: set[tuple[str, str, str]] = set()
        self.remembered = remembered

    def lines(self, samples: Iterable[dict[str, Any]], table_of: Callable[[str], str | None]) -> list[str]:
        out = []
        for s in samples:
            kind = kind_of(s)
            if kind in self.seen:
                continue
            if len(self.seen) < self.remembered:
                self.seen.add(kind)
            out.append(first_letter_line(s, table_of(s["topic"])))
        return out


def first_letter_line(s: dict[str, Any], table: str | None) -> str:
    where = f"{s['topic']}[{s['partition']}]@{s['offset']}"
    return (f"dead letter: {table or s['topic']} ({s['stage']}): {s['reason']} (record {where}; "
            "further letters of this kind are counted in the batch lines; `cdckit dlq list` shows them all)")
