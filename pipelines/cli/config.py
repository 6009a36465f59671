"""`cdckit config check|roles-sql`."""
from __future__ import annotations

from pathlib import Path

import click

from pipelines.cli.base import app, config_option, load
from pipelines.cli.render import say


@app.group("config")
def config_group() -> None:
    """Check the configuration."""


@config_group.command("check")
@config_option
@click.option("--connect", is_flag=True, help="also connect to PostgreSQL and report each privilege "
              "postgres.user (and postgres.reader_user) lacks (exit 2 if any)")
def config_check(config_path: Path, connect: bool) -> None:
    """Validate the config (fields and secrets); without --connect, nothing is contacted."""
    cfg = load(config_path)
    from pipelines.spark.cluster import check_checkpoint

    check_checkpoint(cfg)  # on a cluster, a checkpoint every host sees
    say(f"config ok: {len(cfg.tables)} table(s), topic prefix '{cfg.topic_prefix}', "
        f"search {cfg.search.kind} at {cfg.search.url}, redis at {cfg.redis.url}")
    if connect:
        from pipelines.errors import PrivilegesMissing
        from pipelines.ops import privileges
        from pipelines.ops.table_checks import check_database_tables

        # The tables first: each exists, has a key, its redis_key placeholders are key columns and
        # a custom key is within its replica identity (a ConfigError naming tables.N.<field>).
        check_database_tables(cfg)
        say(f"tables: {len(cfg.tables)} found, keys and redis_key placeholders match")
        lacking = privileges.missing(cfg)
        for line in lacking:
            say(f"missing privilege: {line}")
        reader = cfg.postgres.reader_user
        reader_lacking = privileges.missing_reader(cfg)
        for line in reader_lacking:
            say(f"missing privilege: {line} (reader {reader})")
        if lacking:
            raise PrivilegesMissing(cfg.postgres.user, lacking)
        if reader_lacking:
            raise PrivilegesMissing(reader, reader_lacking, "postgres.reader_user")
        say(f"postgres: {cfg.postgres.user} has every privilege the pipeline needs")
        if reader:
            say(f"postgres: reader {reader} can read every synced table (verify, status)")


@config_group.command("roles-sql")
@config_option
@click.option("--cdc-role", default="cdckit_cdc", show_default=True,
              help="the replication role (Debezium, and cdckit's postgres.user)")
@click.option("--reader-role", default="cdckit_reader", show_default=True,
              help="the read-only role (a config for `cdckit verify` and `status`)")
def config_roles_sql(config_path: Path, cdc_role: str, reader_role: str) -> None:
    """Print connectors/sql/roles.sql for this config's tables, for a superuser to run with psql."""
    from pipelines.errors import ConfigError
    from pipelines.ops import privileges

    cfg = load(config_path)
    try:
        script = privileges.roles_script(cfg, cdc_role, reader_role)
    except ValueError as exc:
        raise ConfigError("--cdc-role/--reader-role", str(exc)) from None
    click.echo(script, nl=False)
