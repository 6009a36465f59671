"""verify's comparison of a document with what a store holds: `_meta` by its key columns' types,
as the leaves are compared, and the rest field by field."""

from pipelines.ops.verify_documents import document_difference

TYPES = {"__relations__": set(), "id": "numeric", "note": "text"}
META_TYPES = {"orders": {"id": "numeric"}, "order_tags": {"order_id": "numeric", "tag_id": "int4"}}


def want(ids=("1.5",), tags=(2, 3)):
    return {"id": ids[0], "note": "x", "_meta": {"orders": {"id": list(ids)},
                                                 "order_tags": {"order_id": list(ids), "tag_id": list(tags)}}}


def test_meta_keys_compare_by_their_columns_types():
    held = {"id": "1.50", "note": "x", "_meta": {"orders": {"id": ["1.50"]},
                                                 "order_tags": {"order_id": ["1.5"], "tag_id": [2, 3]}}}
    assert document_difference(held, want(), TYPES, META_TYPES) is None


def test_a_meta_that_differs_is_named_down_to_the_column():
    held = {"id": "1.5", "note": "x", "_meta": {"orders": {"id": ["1.5"]},
                                                "order_tags": {"order_id": ["1.5"], "tag_id": [2]}}}
    assert document_difference(held, want(), TYPES, META_TYPES) == "_meta.order_tags.tag_id"
    assert document_difference({**held, "_meta": {"orders": {"id": ["1.5"]}}}, want(), TYPES, META_TYPES) == "_meta"
    assert document_difference({"id": "1.5", "note": "x"}, want(), TYPES, META_TYPES) == "_meta"


def test_a_meta_the_config_does_not_ask_for_is_a_difference():
    held = {"id": "1.5", "note": "x", "_meta": {"orders": {"id": ["1.5"]}}}
    assert document_difference(held, {"id": "1.5", "note": "x"}, TYPES) == "_meta"
    assert document_difference({"id": "1.5", "note": "y"}, {"id": "1.5", "note": "x"}, TYPES) == "note"
