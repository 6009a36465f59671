"""The documents' own schema watch (issue #38.7 and the loud half of #38.3): a column the documents
read changing under `on_schema_change: stop` stops the documents' batch before it folds anything;
under another policy it is logged once, as an error naming `cdckit rebuild all`."""
import copy
import logging

import pytest

from pipelines.config import parse_config
from pipelines.errors import SchemaChangeError
from pipelines.documents import documents_query
from pipelines.documents.documents_query import ColumnDrift
from tests.support.configs import BASE
from tests.unit.pipelines.documents.test_documents_fingerprint import RESOLVED


def config(policy: str):
    data = copy.deepcopy(BASE)
    data["tables"] = [{"name": t, "on_schema_change": policy} for t in ("public.orders", "public.lines")]
    return parse_config(data)


@pytest.fixture
def catalog(monkeypatch):
    now = copy.deepcopy(RESOLVED.types)

    class Conn:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    from connectors import postgres
    monkeypatch.setattr(postgres, "connect", lambda kwargs: Conn())
    monkeypatch.setattr(postgres, "column_types", lambda conn, table: dict(now[table]))
    return now


def test_drift_names_the_used_columns_retyped_dropped_and_added():
    now = copy.deepcopy(RESOLVED.types)
    now["public.lines"]["price"] = "numeric(20,4)"
    del now["public.lines"]["order_id"]
    now["public.lines"]["unused"] = "text"        # lines show sku and price only: no change to them
    now["public.orders"]["note"] = "text"         # orders show every column
    assert RESOLVED.drift(now) == {
        "public.orders": [("note", "added")],
        "public.lines": [("order_id", "dropped or renamed"), ("price", "type numeric(12,2) -> numeric(20,4)")]}
    assert RESOLVED.drift(RESOLVED.types) == {}
    assert RESOLVED.joined() == {"public.orders": {"id"}, "public.lines": {"id", "order_id"}}


def test_a_join_columns_new_type_stops_under_any_policy(catalog):
    drift = ColumnDrift(config("evolve"), RESOLVED)
    catalog["public.lines"]["order_id"] = "text"
    with pytest.raises(SchemaChangeError, match="join rows by order_id"):
        drift.check()


def test_under_stop_a_retyped_column_stops_the_batch(catalog):
    drift = ColumnDrift(config("stop"), RESOLVED)
    drift.check()                                           # nothing changed: the batch goes on
    catalog["public.lines"]["price"] = "text"
    with pytest.raises(SchemaChangeError, match=r"public.lines: column price type numeric\(12,2\) -> text"):
        drift.check()


def test_under_evolve_it_is_said_once(catalog, caplog):
    drift = ColumnDrift(config("evolve"), RESOLVED)
    catalog["public.orders"]["note"] = "text"
    with caplog.at_level(logging.ERROR, logger=documents_query.log.name):
        drift.check()
        drift.check()
    assert [r.getMessage() for r in caplog.records if "rebuild all" in r.getMessage()] == [
        "documents: public.orders: column note added: documents holding this table keep its old rendering until "
        "`cdckit rebuild all` (run it once the table's re-read is done)"]


def test_an_unread_catalog_holds_the_batch_only_under_stop(monkeypatch):
    from connectors import postgres
    from derived.sinks.store_errors import StoreUnavailable

    def down(kwargs):
        raise OSError("connection refused")

    monkeypatch.setattr(postgres, "connect", down)
    with pytest.raises(StoreUnavailable, match="did not read the catalog"):
        ColumnDrift(config("stop"), RESOLVED).check()
    ColumnDrift(config("evolve"), RESOLVED).check()

