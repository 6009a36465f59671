"""What the configured Postgres user lacks for cdckit and Debezium, found in the catalog.

Each missing privilege is named the way a DBA grants it ("SELECT on public.orders"), so it is
reported before anything starts instead of as a failed connector task later. What is needed
depends on what exists: a support table cdckit still has to create needs CREATE on its schema,
one that exists needs the rights its writers use; a publication that already lists exactly the
tables needs nothing, one that must be created or changed needs ownership of every table in it
(PostgreSQL 15). connectors/sql/roles.sql creates the objects and roles that pass this check.

`gather` reads the facts (catalog queries only, nothing is changed); `missing` is pure.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import psycopg

TRUNCATE_FUNCTION = "public.cdckit_record_truncate"


@dataclass(frozen=True)
class Wanted:
    """The objects the pipeline uses (names as in the config: schema.table, unquoted)."""

    tables: list[str]
    heartbeat_table: str
    signal_table: str
    truncate_table: str
    publication: str
    trigger: str          # the truncate marker trigger's name (connectors.postgres.marker_trigger_name)

    @property
    def published(self) -> list[str]:
        return [*self.tables, self.signal_table, self.heartbeat_table, self.truncate_table]


@dataclass(frozen=True)
class TableFacts:
    name: str
    exists: bool
    schema_exists: bool = True
    schema_usage: bool = True
    schema_create: bool = False
    privileges: frozenset[str] = frozenset()   # of SELECT, INSERT, UPDATE, TRIGGER
    owned: bool = False                        # the user is, or inherits, its owner
    has_trigger: bool = False                  # the truncate marker trigger is on it


@dataclass(frozen=True)
class Facts:
    user: str
    database: str
    replication: bool                          # REPLICATION attribute (or superuser)
    database_create: bool
    tables: dict[str, TableFacts]              # every table of Wanted.published
    function_exists: bool
    public_create: bool                        # CREATE on schema public (for the trigger function)
    publication_exists: bool
    publication_owned: bool = False
    publication_tables: frozenset[str] = field(default_factory=frozenset)


# Rights each support table's users need once it exists: Debezium's heartbeat query upserts;
# signals are inserted by `cdckit snapshot` and by Debezium's incremental snapshots; all are snapshotted.
_SUPPORT_RIGHTS = {"heartbeat_table": ("SELECT", "INSERT", "UPDATE"), "signal_table": ("SELECT", "INSERT"),
                   "truncate_table": ("SELECT",)}


def missing(facts: Facts, wanted: Wanted) -> list[str]:
    """Each missing privilege, named, in the order they are needed; empty when all are held."""
    out: list[str] = []

    def need(text: str) -> None:
        if text not in out:
            out.append(text)

    if not facts.replication:
        need(f"REPLICATION (role attribute of {facts.user}: Debezium streams through a replication slot)")
    schema_of = {name: name.split(".", 1)[0] for name in wanted.published}
    for name in wanted.tables:
        t = facts.tables[name]
        if not t.exists:
            continue  # a missing table is reported by the table checks (pipelines/ops/table_checks.py)
        if not t.schema_usage:
            need(f"USAGE on schema {schema_of[name]}")
        if "SELECT" not in t.privileges:
            need(f"SELECT on {name}")
        if not t.has_trigger and "TRIGGER" not in t.privileges:
            need(f"TRIGGER on {name} (to add the truncate marker trigger {wanted.trigger})")
    for attr, rights in _SUPPORT_RIGHTS.items():
        name = getattr(wanted, attr)
        t = facts.tables[name]
        if not t.exists:
            if not t.schema_exists:
                need(f"schema {schema_of[name]} (does not exist; needed for {name})")
            elif not t.schema_create:
                need(f"CREATE on schema {schema_of[name]} (to create {name})")
            continue
        if not t.schema_usage:
            need(f"USAGE on schema {schema_of[name]}")
        for right in rights:
            if right not in t.privileges:
                need(f"{right} on {name}")
    if not facts.function_exists and not facts.public_create:
        need(f"CREATE on schema public (to create function {TRUNCATE_FUNCTION})")
    _publication(facts, wanted, need)
    return out


def _publication(facts: Facts, wanted: Wanted, need) -> None:
    pub = wanted.publication
    published = [n for n in wanted.published if facts.tables[n].exists or n not in wanted.tables]
    if facts.publication_exists and facts.publication_tables == frozenset(published):
        return  # exactly as wanted: neither cdckit nor Debezium alters it
    if not facts.publication_exists and not facts.database_create:
        need(f"CREATE on database {facts.database} (to create publication {pub})")
    if facts.publication_exists and not facts.publication_owned:
        need(f"ownership of publication {pub} (to set its tables)")
    for name in published:
        t = facts.tables[name]
        # A support table cdckit creates is its own; SET TABLE re-checks every listed table.
        if t.exists and not t.owned:
            need(f"ownership of {name} (needed to add it to publication {pub})")


def gather(conn: psycopg.Connection, wanted: Wanted) -> Facts:
    """The facts about the connected user (catalog reads only)."""
    user, database, replication, db_create, public_create = conn.execute(
        "SELECT current_user, current_database(), r.rolreplication OR r.rolsuper, "
        "has_database_privilege(current_database(), 'CREATE'), has_schema_privilege('public', 'CREATE') "
        "FROM pg_roles r WHERE r.rolname = current_user").fetchone()
    tables = {name: _table_facts(conn, name, wanted.trigger) for name in dict.fromkeys(wanted.published)}
    function_exists = conn.execute("SELECT 1 FROM pg_proc WHERE proname = 'cdckit_record_truncate' "
                                   "AND pronamespace = 'public'::regnamespace").fetchone() is not None
    pub = conn.execute("SELECT pg_has_role(pubowner, 'USAGE') FROM pg_publication WHERE pubname = %s",
                       (wanted.publication,)).fetchone()
    listed = frozenset(f"{s}.{t}" for s, t in conn.execute(
        "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s", (wanted.publication,)))
    # The config names tables unquoted: Postgres folds them to lower case, so compare folded.
    by_folded = {name.lower(): name for name in tables}
    return Facts(user, database, replication, db_create, tables, function_exists, public_create,
                 pub is not None, bool(pub and pub[0]), frozenset(by_folded.get(n, n) for n in listed))


def _table_facts(conn: psycopg.Connection, name: str, trigger: str) -> TableFacts:
    schema, table = (part.lower() for part in name.split(".", 1))
    ns = conn.execute("SELECT oid, has_schema_privilege(oid, 'USAGE'), has_schema_privilege(oid, 'CREATE') "
                      "FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    if ns is None:
        return TableFacts(name, False, schema_exists=False, schema_usage=False)
    row = conn.execute(
        "SELECT has_table_privilege(c.oid, 'SELECT'), has_table_privilege(c.oid, 'INSERT'), "
        "has_table_privilege(c.oid, 'UPDATE'), has_table_privilege(c.oid, 'TRIGGER'), "
        "pg_has_role(c.relowner, 'USAGE'), "
        "EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = c.oid AND g.tgname = %s) "
        "FROM pg_class c WHERE c.relnamespace = %s AND c.relname = %s", (trigger, ns[0], table)).fetchone()
    if row is None:
        return TableFacts(name, False, schema_usage=ns[1], schema_create=ns[2])
    rights = frozenset(r for r, held in zip(("SELECT", "INSERT", "UPDATE", "TRIGGER"), row[:4]) if held)
    return TableFacts(name, True, True, ns[1], ns[2], rights, row[4], row[5])


def missing_privileges(conn: psycopg.Connection, wanted: Wanted) -> list[str]:
    return missing(gather(conn, wanted), wanted)


def missing_read_privileges(conn: psycopg.Connection, tables: list[str]) -> list[str]:
    """What a read-only role (verify, status) lacks: USAGE on each schema and SELECT on each table."""
    out: list[str] = []
    for name in tables:
        t = _table_facts(conn, name, "")
        if not t.exists:
            continue  # reported by the table checks
        if not t.schema_usage and f"USAGE on schema {name.split('.', 1)[0]}" not in out:
            out.append(f"USAGE on schema {name.split('.', 1)[0]}")
        if "SELECT" not in t.privileges:
            out.append(f"SELECT on {name}")
    return out
