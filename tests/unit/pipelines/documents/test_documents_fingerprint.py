"""The documents' state fingerprint (issue #38.6): it changes with what the state was built from,
and only with that: `numeric_as_number` of a table no document reads leaves it as it is."""
import copy

from derived.nested import DocumentSpec, Relation
from pipelines.documents.document_specs import ResolvedDocuments, fingerprint
from pipelines.config import parse_config
from tests.support.configs import BASE

SPEC = DocumentSpec("orders", "public.orders", None, (
    Relation("lines", "public.lines", "one_to_many", (("order_id", "id"),), ("sku", "price"), None),))
RESOLVED = ResolvedDocuments((SPEC,), {"public.orders": ("id",), "public.lines": ("id",)},
                             {"public.orders": {"id": "bigint"},
                              "public.lines": {"id": "bigint", "order_id": "bigint", "price": "numeric(12,2)"}})


def config(numbers: dict[str, list[str]]):
    data = copy.deepcopy(BASE)
    data["tables"] = [{"name": t, "numeric_as_number": numbers.get(t, [])}
                      for t in ("public.orders", "public.lines", "public.audit")]
    return parse_config(data)


def test_a_table_in_no_document_leaves_the_fingerprint_alone():
    assert fingerprint(RESOLVED, config({})) == fingerprint(RESOLVED, config({"public.audit": ["amount"]}))


def test_a_documents_table_changes_it():
    assert fingerprint(RESOLVED, config({})) != fingerprint(RESOLVED, config({"public.lines": ["price"]}))
