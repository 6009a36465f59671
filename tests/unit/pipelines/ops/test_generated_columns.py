"""Stored generated columns (issue 37): before PostgreSQL 18 logical replication does not publish
them, so a kept one is refused by the table checks (a fake catalog here); on 18+ the publication
is created with publish_generated_columns = stored instead."""
import copy

import pytest

from connectors import postgres
from connectors.postgres import KeyIdentity
from pipelines.config import parse_config
from pipelines.errors import ConfigError
from pipelines.ops.table_checks import check_tables
from tests.support.configs import BASE

ID = KeyIdentity(("id",), "default", ("id",))


def config(documents=None, **table):
    data = copy.deepcopy(BASE)
    data["tables"] = [{"name": "public.orders", **table}, {"name": "public.lines"}]
    if documents:
        data["documents"] = documents
    return parse_config(data)


def check(cfg, generated, version=150004):
    check_tables(cfg, {"public.orders": ID, "public.lines": ID}, None, generated, version)


def test_a_kept_generated_column_is_refused_naming_table_column_and_remedy():
    with pytest.raises(ConfigError) as exc:
        check(config(), {"public.orders": ["total"]})
    text = str(exc.value)
    assert exc.value.field == "tables.0.columns" and "public.orders.total" in text and "PostgreSQL 15" in text
    assert "`columns:`" in text and "publish_generated_columns = stored" in text and "\n" not in text


def test_a_projection_leaving_it_out_passes_and_one_keeping_it_is_refused():
    check(config(columns=["id", "name"]), {"public.orders": ["total"]})
    with pytest.raises(ConfigError, match="tables.0.columns"):
        check(config(columns=["id", "total"]), {"public.orders": ["total"]})


def test_postgres_18_publishes_them_so_nothing_is_refused():
    check(config(), {"public.orders": ["total"]}, version=180000)
    check(config(), {"public.orders": ["total"]}, version=180003)


def test_a_documents_relation_keeping_it_is_refused():
    doc = {"name": "orders", "root": "public.orders", "columns": ["id"],
           "relations": [{"label": "lines", "table": "public.lines", "type": "one_to_many", "join": {"order_id": "id"}}]}
    cfg = config(documents=[doc], columns=["id"])
    with pytest.raises(ConfigError) as exc:
        check(cfg, {"public.orders": ["total"], "public.lines": ["amount"]})
    # public.lines itself keeps every column: its own table entry is named first
    assert exc.value.field == "tables.1.columns"
    data = copy.deepcopy(BASE)
    data["tables"] = [{"name": "public.orders", "columns": ["id"]}, {"name": "public.lines", "columns": ["id", "order_id"]}]
    data["documents"] = [doc]
    with pytest.raises(ConfigError) as exc:
        check(parse_config(data), {"public.lines": ["amount"]})
    assert exc.value.field == "documents.0.relations.0.columns" and "document orders" in str(exc.value)
    data["documents"][0]["relations"][0]["columns"] = ["id", "order_id"]
    check(parse_config(data), {"public.lines": ["amount"]})
    data["documents"][0]["columns"] = None
    with pytest.raises(ConfigError, match="documents.0.columns"):
        check(parse_config(data), {"public.orders": ["total"]})


class _Result:
    def __init__(self, rows):
        self.rows = rows

    def fetchone(self):
        return self.rows[0] if self.rows else None

    def fetchall(self):
        return self.rows


class FakeCatalog:
    """Answers ensure_publication's catalog reads; records every statement."""

    def __init__(self, version: int, publication: tuple | None = None, tables=()):
        self.version, self.publication, self.tables, self.sql = version, publication, list(tables), []

    def execute(self, sql, params=None):
        self.sql.append(sql)
        if sql.startswith("SHOW server_version_num"):
            return _Result([(str(self.version),)])
        if sql.startswith("SELECT 1 FROM pg_publication"):
            return _Result([(1,)] if self.publication else [])
        if sql.startswith("SELECT pubgencols"):
            return _Result([self.publication])
        if "pg_publication_tables" in sql:
            return _Result([tuple(t.split(".")) for t in self.tables])
        return _Result([])


def test_the_publication_publishes_generated_columns_from_postgres_18():
    conn = FakeCatalog(180001)
    assert postgres.ensure_publication(conn, "cdckit", ["public.orders"]) == "created"
    assert conn.sql[-1] == 'CREATE PUBLICATION "cdckit" FOR TABLE public.orders WITH (publish_generated_columns = stored)'
    old = FakeCatalog(150004)
    assert postgres.ensure_publication(old, "cdckit", ["public.orders"]) == "created"
    assert old.sql[-1] == 'CREATE PUBLICATION "cdckit" FOR TABLE public.orders'


def test_an_existing_publication_on_18_gets_the_option_once():
    conn = FakeCatalog(180000, ("n",), ["public.orders"])
    assert postgres.ensure_publication(conn, "cdckit", ["public.orders"]) == "updated"
    assert 'ALTER PUBLICATION "cdckit" SET (publish_generated_columns = stored)' in conn.sql
    done = FakeCatalog(180000, ("s",), ["public.orders"])
    assert postgres.ensure_publication(done, "cdckit", ["public.orders"]) == "unchanged"
    assert not any(s.startswith("ALTER") for s in done.sql)
