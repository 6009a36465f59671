"""A documents' state pickled before the modules moved into pipelines/documents/ still loads."""
import pickle
import sys
import types

from derived.nested import NestedState
from pipelines.documents import documents_query
from pipelines.documents.nested_fold import FoldState
from tests.unit.pipelines.documents.test_nested_fold import KEYS, SPEC


def test_a_state_pickled_under_the_old_module_name_loads_as_the_fold_state(monkeypatch):
    old = types.ModuleType("pipelines.apply.nested_fold")
    old.FoldState = FoldState
    monkeypatch.setitem(sys.modules, "pipelines.apply.nested_fold", old)
    monkeypatch.setattr(FoldState, "__module__", "pipelines.apply.nested_fold")
    blob = pickle.dumps(FoldState(NestedState(SPEC, dict(KEYS)), fences={"t/0": 7}))
    assert b"pipelines.apply.nested_fold" in blob
    monkeypatch.undo()
    assert "pipelines.apply.nested_fold" not in sys.modules

    held = documents_query._StateUnpickler(__import__("io").BytesIO(blob)).load()
    assert isinstance(held, FoldState) and held.fences == {"t/0": 7}
