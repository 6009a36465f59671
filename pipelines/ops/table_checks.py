"""The configured tables checked against the database before anything starts.

Each mistake here loses data silently later: a table without a primary key produces keyless
records a compacted topic refuses; a Redis key placeholder that is not a key column fails the first
batch; a custom `key:` outside the replica identity loses every delete and every key change,
because their WAL records carry only the identity's columns (connectors/postgres.KeyIdentity); a
stored generated column a kept projection includes is null in every streamed change before
PostgreSQL 18 (logical replication does not publish it), so it is refused here.
"""
from __future__ import annotations

import string

from connectors.postgres import PUBLISHES_GENERATED, KeyIdentity
from pipelines.config import Config
from pipelines.errors import ConfigError


def check_tables(config: Config, identities: dict[str, KeyIdentity | None],
                 types: dict[str, dict[str, str]] | None = None,
                 generated: dict[str, list[str]] | None = None, server_version: int | None = None,
                 enums: dict[str, list[str]] | None = None) -> None:
    """`types`: each table's column types (name -> format_type), for what names columns by type;
    `generated`: each table's stored generated columns (pg_attribute.attgenerated = 's'), refused
    where a table's or a document's kept columns include one, unless `server_version` (server_version_num)
    is 18 or later, where the publication publishes them (connectors/postgres.ensure_publication);
    `enums`: enum type name (as format_type spells it) -> its labels, for the filters' literals."""
    for i, table in enumerate(config.tables):
        ident = identities.get(table.name)
        if ident is None:
            raise ConfigError(f"tables.{i}.name", f"{table.name} does not exist in database "
                              f"{config.postgres.database!r}: create it first, or remove it from the config")
        key = list(table.key or ident.primary_key)
        if not key:
            raise ConfigError(f"tables.{i}.key", f"{table.name} has no primary key: add one (Debezium keys its "
                              "records by it, and a compacted topic refuses records without a key)")
        placeholders = {f for _, f, _, _ in string.Formatter().parse(table.redis_key_template) if f is not None}
        unknown = placeholders - set(key) - {"_id"}
        if unknown:
            raise ConfigError(f"tables.{i}.redis_key", f"placeholders {sorted(unknown)} are not key columns of "
                              f"{table.name} (its key: {key}); use those or {{_id}}")
        outside = [c for c in table.key or () if c not in ident.identity_columns]
        if outside:
            raise ConfigError(f"tables.{i}.key", f"{outside} of {table.name} are not in its replica identity "
                              f"({ident.replica_identity}: {list(ident.identity_columns)}), so deletes and key "
                              f"changes would not carry them and the stores would keep removed rows: run "
                              f"ALTER TABLE {table.name} REPLICA IDENTITY FULL (or USING INDEX on a unique index "
                              f"over {list(table.key)}), or key by the primary key")
        if types is not None:
            _check_numbers(i, table.name, table.numeric_as_number, types.get(table.name, {}))
            unpublished = (generated or {}).get(table.name, []) if (
                server_version is None or server_version < PUBLISHES_GENERATED) else []
            _check_filter(i, table, types.get(table.name, {}), unpublished, enums or {})
            _check_transform(i, table, types.get(table.name, {}), unpublished)
            _check_lookups(i, table, types.get(table.name, {}), unpublished, key)
    if generated and (server_version is None or server_version < PUBLISHES_GENERATED):
        _check_generated(config, generated, server_version)


def _check_generated(config: Config, generated: dict[str, list[str]], server_version: int | None) -> None:
    """A stored generated column is not in the WAL records pgoutput sends before PostgreSQL 18:
    kept, it would be null in every document and Redis entry after the first change of its row."""
    def refuse(field: str, table: str, kept: list[str] | None, what: str) -> None:
        hit = [c for c in generated.get(table, []) if kept is None or c in kept]
        if hit:
            version = f"PostgreSQL {server_version // 10000}" if server_version else "this PostgreSQL"
            raise ConfigError(field, f"{table}.{hit[0]} is a stored generated column{what}, which {version}'s "
                              f"logical replication does not publish (it would be null in every document and "
                              f"Redis entry): leave it out with `columns:` (or compute it in the reader), or on "
                              f"PostgreSQL 18+ publish it (publication option publish_generated_columns = stored, "
                              f"which cdckit sets there)" + (f"; also generated: {hit[1:]}" if hit[1:] else ""))

    for i, table in enumerate(config.tables):
        refuse(f"tables.{i}.columns", table.name, table.columns, "")
    for j, doc in enumerate(config.documents):
        refuse(f"documents.{j}.columns", doc.root, doc.columns, f" kept by document {doc.name}")

        def walk(rels, path: str) -> None:
            for k, r in enumerate(rels):
                refuse(f"{path}.{k}.columns", r.row_table, r.columns, f" kept by document {doc.name}")
                walk(r.relations, f"{path}.{k}.relations")

        walk(doc.relations, f"documents.{j}.relations")


def _check_filter(i: int, table, types: dict[str, str], unpublished: list[str],
                  enums: dict[str, list[str]]) -> None:
    """A row filter or soft delete fits the table's columns and their types (connectors/row_filter.py),
    compares an enum only with its labels (another user-defined type only with the null tests), and
    reads no column the WAL does not carry (a stored generated one before PostgreSQL 18)."""
    from connectors.row_filter import FilterError, literals_by_column, predicate_columns, store_predicate, type_class

    for store in ("search", "cache"):
        where, soft = table.row_filter(store)
        field = f"tables.{i}.where" + (f".{store}" if isinstance(table.where, dict) else "")
        if soft is not None and soft[0] not in types:
            raise ConfigError(f"tables.{i}.soft_delete.column", f"{soft[0]!r} is not a column of {table.name}")
        try:
            store_predicate(where, soft, types)
        except FilterError as exc:
            at = f"tables.{i}.soft_delete" if soft is not None and exc.column == soft[0] and (
                where is None or exc.column not in predicate_columns(where, None)) else field
            raise ConfigError(at, f"{table.name}: {exc}") from None
        compared = literals_by_column(where)
        if soft is not None and soft[1] is not None:
            compared.setdefault(soft[0], set()).add(soft[1])
        for column, values in compared.items():
            pg_type = types.get(column, "")
            if type_class(pg_type) != "label":
                continue
            if pg_type not in enums:
                raise ConfigError(field, f"{table.name}: {column} is {pg_type}, not an enum: only 'is null' and "
                                  "'is not null' apply to it")
            unknown = sorted(str(v) for v in values if v not in enums[pg_type])
            if unknown:
                raise ConfigError(field, f"{table.name}: {unknown} are not labels of {pg_type} "
                                  f"({enums[pg_type]}): the filter would keep or drop every row")
        hit = sorted(predicate_columns(where, soft) & set(unpublished))
        if hit:
            raise ConfigError(field, f"{table.name}.{hit[0]} is a stored generated column, which logical replication "
                              "before PostgreSQL 18 does not publish: a filter on it would judge every change by a "
                              "null; filter on the columns it is computed from")


def _check_transform(i: int, table, types: dict[str, str], unpublished: list[str]) -> None:
    """Computed fields read columns the table has (not unpublished generated ones) and do not take a
    column's field name; removed fields exist; the hook imports (derived/transforms.py, pipelines/apply/hooks.py)."""
    from derived.transforms import columns_read

    t = table.transform
    fields = {table.rename.get(c, c) for c in table.columns or types}
    for name, spec in t.fields.items():
        at = f"tables.{i}.transform.fields.{name}"
        if name in fields:
            raise ConfigError(at, f"{table.name}: {name!r} is already a field of its documents (a column): name the "
                              "computed field otherwise, or leave the column out with `columns:`")
        for column in sorted(columns_read(spec)):
            if column not in types:
                raise ConfigError(at, f"{table.name}: no column {column!r} (computed fields read columns by their "
                                  "Postgres names, before renames)")
            if column in unpublished:
                raise ConfigError(at, f"{table.name}.{column} is a stored generated column, which logical "
                                  "replication before PostgreSQL 18 does not publish")
    known = fields | set(t.fields)
    for store in ("search", "cache"):
        unknown = [f for f in t.removed(store) if f not in known]
        if unknown:
            raise ConfigError(f"tables.{i}.transform.remove", f"{table.name}: {unknown} are not fields of its "
                              f"documents (fields: {sorted(known)[:20]})")
    if t.hook:
        from pipelines.apply.hooks import HookError, load_hook

        try:
            load_hook(t.hook)
        except HookError as exc:
            raise ConfigError(f"tables.{i}.transform.hook", f"{table.name}: {exc} (the module must be importable "
                              "by the job's Python, on the driver and every executor)") from None


_SCORES = ("int", "numeric", "float", "real", "bool", "date", "timestamp", "timestamptz")


# Key and member columns: types whose value reads the same from the WAL and from Postgres's text
# (verify renders the database's rows to compare), so an entry's key is the same string both ways.
_KEYABLE = ("int", "text", "bpchar", "citext", "uuid", "bool", "date", "label")


def _check_lookups(i: int, table, types: dict[str, str], unpublished: list[str], key: list[str]) -> None:
    """A lookup's member names the row, it reads columns the table has and the WAL carries (a
    transform hook may add others), keys by values with one exact text form, and scores by a number,
    a date, a time or a boolean (derived/sinks/cache/lookups.py)."""
    from connectors.row_filter import type_class

    for n, lk in enumerate(table.lookups):
        at = f"tables.{i}.lookups.{n}"
        if not lk.identifies_row(key):
            raise ConfigError(f"{at}.member", f"{table.name}: the member {lk.member!r} must name the row ({{_id}}, or "
                              f"every key column: {key}): two rows with one member would take each other's entry away")
        for column in lk.columns:
            if column not in types:
                if table.transform.hook:
                    continue   # the hook's row may carry it
                raise ConfigError(at, f"{table.name}: no column {column!r} (lookups read columns by their Postgres "
                                  "names, before renames)")
            if column in unpublished:
                raise ConfigError(at, f"{table.name}.{column} is a stored generated column, which logical "
                                  "replication before PostgreSQL 18 does not publish")
            kind = type_class(types[column])
            if column == lk.score:
                if kind not in _SCORES and not types[column].startswith("time"):
                    raise ConfigError(f"{at}.score", f"{table.name}.{column} is {types[column]}: a score is a "
                                      "number, a date, a timestamp, a time or a boolean")
            elif kind not in _KEYABLE:
                raise ConfigError(at, f"{table.name}.{column} is {types[column]}: lookup keys and members read "
                                  "integers, text, uuid, booleans, dates and enums (one exact text form)")


def _check_numbers(i: int, name: str, columns: list[str], types: dict[str, str]) -> None:
    """numeric_as_number names numeric or money columns (arrays of them too): any other type is
    not rendered from a decimal string, and the setting would silently do nothing."""
    from connectors.typed_values import is_numeric

    for column in columns:
        pg_type = types.get(column)
        if pg_type is None:
            raise ConfigError(f"tables.{i}.numeric_as_number", f"{column!r} is not a column of {name}")
        if not is_numeric(pg_type):
            raise ConfigError(f"tables.{i}.numeric_as_number", f"{name}.{column} is {pg_type}, not numeric or money")


def check_database_tables(config: Config, conn=None) -> None:
    """On `conn`, or a connection of its own."""
    from connectors import postgres

    if conn is None:
        with postgres.connect(config.postgres.dsn_kwargs()) as conn:
            return check_database_tables(config, conn)
    identities = {t.name: postgres.key_identity(conn, t.name) for t in config.tables}
    types = {t.name: postgres.column_types(conn, t.name) for t in config.tables if identities[t.name] is not None}
    names = set(identities) | {name for d in config.documents for name in d.tables()}
    generated = {name: postgres.generated_columns(conn, name) for name in sorted(names)}
    enums = dict(conn.execute("SELECT format_type(t.oid, NULL), array_agg(e.enumlabel ORDER BY e.enumsortorder) "
                              "FROM pg_type t JOIN pg_enum e ON e.enumtypid = t.oid GROUP BY t.oid").fetchall()) \
        if any(t.filtered for t in config.tables) else {}
    check_tables(config, identities, types, generated, postgres.server_version(conn), enums)
