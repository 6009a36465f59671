"""The configured Postgres user's privileges, checked before anything starts (connectors/postgres_privileges.py)."""
from __future__ import annotations

from connectors import postgres
from connectors.postgres_privileges import Wanted, missing_privileges
from pipelines.config import Config
from pipelines.errors import PrivilegesMissing


def wanted(config: Config) -> Wanted:
    pg = config.postgres
    return Wanted([t.name for t in config.tables], pg.heartbeat_table, pg.signal_table, pg.truncate_table,
                  pg.publication, postgres.marker_trigger_name(pg.truncate_table))


def missing(config: Config, conn=None) -> list[str]:
    """Every privilege `postgres.user` lacks for bootstrap, `connector apply` and Debezium."""
    if conn is not None:
        return missing_privileges(conn, wanted(config))
    with postgres.connect(config.postgres.dsn_kwargs()) as fresh:
        return missing_privileges(fresh, wanted(config))


def require(config: Config, conn=None) -> None:
    """Refuses (exit 2) naming the missing privileges."""
    lacking = missing(config, conn)
    if lacking:
        raise PrivilegesMissing(config.postgres.user, lacking)


def missing_reader(config: Config) -> list[str]:
    """What `postgres.reader_user` lacks for verify and status (empty when none is configured)."""
    from connectors.postgres_privileges import missing_read_privileges

    if config.postgres.reader_user is None:
        return []
    with postgres.connect(config.postgres.reader_dsn_kwargs()) as conn:
        return missing_read_privileges(conn, [t.name for t in config.tables])


def roles_script(config: Config, cdc_role: str, reader_role: str) -> str:
    """connectors/sql/roles.sql bound to this config's tables, support tables and publication."""
    from connectors import postgres_roles

    pg = config.postgres
    return postgres_roles.render(postgres_roles.variables(
        cdc_role, reader_role, [t.name for t in config.tables], pg.heartbeat_table, pg.signal_table,
        pg.truncate_table, pg.publication))
