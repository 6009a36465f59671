"""`cdckit wait`: block until a commit is visible in a store (read-your-writes, issue #23)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from pipelines.cli.base import app, config_option, json_option, load, say, say_error


@app.command("wait")
@config_option
@click.option("--lsn", required=True, help="the commit's token: a WAL position ('16/B374D848' or an integer), "
              "e.g. SELECT pg_current_wal_insert_lsn() right after the commit")
@click.option("--store", type=click.Choice(["search", "cache", "both"]), default="both", show_default=True)
@click.option("--timeout", "timeout_s", type=float, default=10, show_default=True, help="seconds")
@json_option
def wait_command(config_path: Path, lsn: str, store: str, timeout_s: float, as_json: bool) -> None:
    """Wait until everything committed up to LSN is visible in STORE. Exit 0 when it is, 4 on timeout."""
    from connectors.visibility_watermark import format_lsn, parse_lsn
    from pipelines.client import NotVisible, wait_visible
    from pipelines.apply.stores import live_sinks
    cfg = load(config_path)
    try:
        token = parse_lsn(lsn)
    except ValueError:
        raise click.BadParameter(f"not a WAL position: {lsn!r}", param_hint="--lsn") from None
    stores = ["search", "cache"] if store == "both" else [store]
    missing = [s for s in stores if s not in cfg.sinks]
    if missing:
        raise click.BadParameter(f"this config does not write {', '.join(missing)}", param_hint="--store")

    sinks: dict = {}

    def read(which: str) -> int:
        # Built in here: a store that cannot be reached (or a client that cannot be made) is a wait
        # that times out (exit 4), as a store that does not answer is.
        if not sinks:
            sinks.update(live_sinks(cfg, stores))
        return min(sinks[s].visible(cfg.topic_prefix) for s in stores)

    try:
        waited = wait_visible(token, store, timeout_s, read=read)
    except NotVisible as exc:
        if as_json:
            say(json.dumps({"visible": False, "lsn": format_lsn(token), "store": store,
                            "position": format_lsn(exc.position)}))
        else:
            say_error(str(exc))
        sys.exit(4)
    if as_json:
        say(json.dumps({"visible": True, "lsn": format_lsn(token), "store": store, "waited_s": round(waited, 3)}))
    else:
        say(f"visible in {store} after {waited:.3f} s")
