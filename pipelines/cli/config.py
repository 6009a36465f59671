"""`cdckit config check|roles-sql`."""
from __future__ import annotations

from pathlib import Path

import click

from pipelines.cli.base import app, config_option, load, say


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
    from pipelines.spark.session import check_checkpoint

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


@config_group.command("from-pgsync")
@click.argument("schema", type=click.Path(path_type=Path))
@click.option("--out", "out", type=click.Path(path_type=Path), default=None,
              help="where to write it (several databases: one file each, named OUT-<database>.yaml); default: print")
@click.option("--base", "base", type=click.Path(path_type=Path), default=None,
              help="a YAML file with the connections (postgres, kafka, connect, search, redis, spark, "
                   "topic_prefix); default: pgsync's environment (PG_HOST, PG_USER, PG_PASSWORD, ELASTICSEARCH_URL...)")
@click.option("--no-catalog", is_flag=True, help="do not read Postgres for the joins a schema leaves to the "
              "foreign keys (cdckit then resolves them at start)")
@click.option("--meta", is_flag=True, help="documents carry pgsync's `_meta` (per table, the keys of the rows "
              "that built them), for queries that read it")
def config_from_pgsync(schema: Path, out: Path | None, base: Path | None, no_catalog: bool, meta: bool) -> None:
    """Convert a pgsync schema file (SCHEMA.json) into cdckit config, one per database. What has no
    equivalent is refused by file, node path and key, and nothing is written (exit 2)."""
    import yaml

    from pipelines.errors import ConfigError
    from pipelines.ops import from_pgsync

    base_data = None
    if base is not None:
        try:
            base_data = yaml.safe_load(base.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError("--base", f"{base}: {exc}") from None
        base_data.pop("tables", None)
        base_data.pop("documents", None)
    configs = from_pgsync.configs_from(schema, base_data, use_catalog=not no_catalog, meta=meta)
    for path, text in from_pgsync.render(configs, out, schema.name):
        if path is None:
            click.echo(text, nl=False)
        else:
            path.write_text(text)
            say(f"wrote {path} (check its connections, then `cdckit config check --connect -c {path}`)")


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
