"""`cdckit config check`."""
from __future__ import annotations

from pathlib import Path

from pipelines.cli.base import app, config_option, load
from pipelines.cli.render import say


@app.group("config")
def config_group() -> None:
    """Check the configuration."""


@config_group.command("check")
@config_option
def config_check(config_path: Path) -> None:
    """Validate the config (fields and secrets) without contacting anything."""
    cfg = load(config_path)
    say(f"config ok: {len(cfg.tables)} table(s), topic prefix '{cfg.topic_prefix}', "
        f"search {cfg.search.kind} at {cfg.search.url}, redis at {cfg.redis.url}")
