"""`cdckit dlq list|replay`: the dead-letter topic."""
from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from pipelines.cli.base import app, config_option, json_option, load, out, print_json, say


@app.group("dlq")
def dlq_group() -> None:
    """The dead-letter topic: records that could not be decoded or applied, with the reason."""


@dlq_group.command("list")
@config_option
@click.option("--from-offset", type=int, default=0, show_default=True)
@click.option("--limit", type=int, default=100, show_default=True)
@json_option
def dlq_list(config_path: Path, from_offset: int, limit: int, as_json: bool) -> None:
    """Show dead letters: where each record came from and why it was refused."""
    from pipelines.ops.dead_letter_replay import read_letters

    cfg = load(config_path)
    letters = read_letters(cfg, from_offset)
    if as_json:
        print_json({"topic": cfg.dead_letter_topic, "count": len(letters),
                    "letters": [x.as_json() for x in letters[:limit]]})
        return
    show_letters(letters, limit, cfg.dead_letter_topic)


@dlq_group.command("replay")
@config_option
@click.option("--from-offset", type=int, default=0, show_default=True)
@json_option
def dlq_replay(config_path: Path, from_offset: int, as_json: bool) -> None:
    """Apply dead letters again (after a fix). Versioned writes: older letters change nothing.
    Letters up to the first that still fails count as settled from then on (`cdckit status`)."""
    from pipelines.ops.dead_letter_replay import read_letters, record_replay, replay

    cfg = load(config_path)
    letters = read_letters(cfg, from_offset)
    result = replay(cfg, letters)
    result["settled_below"] = record_replay(cfg, letters, result, from_offset)
    if as_json:
        print_json(result)
    else:
        say(f"replayed {result['replayed']} of {result['letters']} dead letter(s): search +{result['search_applied']}, "
            f"cache +{result['cache_applied']}, {result['stale']} already newer; "
            f"{len(result['still_failing'])} still failing")
        if result["without_payload"]:
            say(f"{result['without_payload']} letter(s) had nothing to replay (no key in a readable source partition, "
                "no value): counted as dealt with")
        for f in result["still_failing"][:50]:
            say(f"  {f['source']}: {f['reason']}")
        say(f"letters below offset {result['settled_below']} are settled (`cdckit status` counts those after it)")
    sys.exit(1 if result["still_failing"] else 0)


def show_letters(letters, limit: int, topic: str) -> None:
    table = Table("offset", "source", "stage", "reason")
    for x in letters[:limit]:
        j = x.as_json()
        # escape: engines' reasons name fields in brackets ("mapper [j.n] cannot be changed"), which
        # rich would take for markup and drop.
        table.add_row(str(x.offset), escape(j["source"]), x.stage, escape(x.reason[:160]))
    out.print(table)
    say(f"{len(letters)} dead letter(s) in {topic}" + (f" (first {limit} shown)" if len(letters) > limit else ""))
