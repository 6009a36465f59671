"""The local stack's least-privilege roles for a config: `postgres.user` as the replication role and
`postgres.reader_user` as the read-only one (the roles script of `cdckit config roles-sql`), each
with a generated password kept in the 0600 file the config names. Both join the stack's
password-login group, so their logins must give the password (the rest of loopback is trusted)."""
from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path
from typing import Any

import yaml

SUPERUSER = "postgres"  # the local stack's initdb superuser (trusted on loopback)


def _password_files(config_path: Path) -> list[Path]:
    """The secret files of postgres.password and reader_password, as the config names them."""
    pg = (yaml.safe_load(config_path.read_text()) or {}).get("postgres") or {}
    out = []
    for key in ("password", "reader_password"):
        ref = pg.get(key)
        if isinstance(ref, dict) and ref.get("file"):
            path = Path(ref["file"])
            out.append(path if path.is_absolute() else config_path.parent / path)
    return out


def ensure_password_files(config_path: Path) -> None:
    """A random password in each missing file; no trailing newline (Connect's directory provider
    reads the file whole)."""
    for path in _password_files(config_path):
        if path.exists():
            continue
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(24))


def admin_dsn(config_path: Path | str) -> dict[str, Any]:
    """The superuser connection to the config's database (creating demo tables, running the script)."""
    pg = (yaml.safe_load(Path(config_path).read_text()) or {}).get("postgres") or {}
    return dict(host=pg.get("host", "127.0.0.1"), port=pg.get("port", 5432), dbname=pg["database"],
                user=SUPERUSER, sslmode="disable", connect_timeout=5)


def ensure(config_path: Path | str) -> list[str]:
    """Passwords, roles, grants, support tables and publication for the config's tables (idempotent;
    run again after adding a table). Returns the roles made ready."""
    from psycopg import sql

    from connectors import postgres
    from pipelines.config import load_config
    from pipelines.devstack.servers import Postgres
    from connectors import postgres_roles

    config_path = Path(config_path)
    ensure_password_files(config_path)
    cfg = load_config(config_path)
    pg = cfg.postgres
    if pg.user == SUPERUSER or not pg.reader_user:
        raise ValueError(f"{config_path}: postgres.user must be a role of its own (not {SUPERUSER}) and "
                         "postgres.reader_user must be set, for the local stack's least-privilege roles")
    with postgres.connect(admin_dsn(config_path)) as conn:
        conn.execute(postgres_roles.render(postgres_roles.variables(
            pg.user, pg.reader_user, [t.name for t in cfg.tables], pg.heartbeat_table, pg.signal_table,
            pg.truncate_table, pg.publication)))
        for role, ref in ((pg.user, pg.password), (pg.reader_user, pg.reader_password)):
            if ref is not None:
                conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(role),
                                                                         sql.Literal(ref.get())))
                conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(Postgres.PASSWORD_GROUP),
                                                              sql.Identifier(role)))
    return [pg.user, pg.reader_user]


if __name__ == "__main__":
    ready = ensure(sys.argv[1])
    print(f"least-privilege roles ready: {ready[0]} (replication), {ready[1]} (read-only)")
