from connectors.table_shape import Column
from pipelines.state.schema import SchemaState


def test_first_sight_records_only_tables_not_seen_before(tmp_path):
    state = SchemaState(tmp_path)
    old = [Column(1, "id", "integer", False)]
    state.first_sight({"public.a": old, "public.gone": []})
    assert state.shapes() == {"public.a": old}
    # A later first sight (a rerun of bootstrap, a table added) keeps what was seen: a change made
    # since stays a change for the schema watch to act on.
    new = old + [Column(2, "extra", "text", True)]
    state.first_sight({"public.a": new, "public.b": new})
    assert state.shapes() == {"public.a": old, "public.b": new}
