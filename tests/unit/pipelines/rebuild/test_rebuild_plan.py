"""What a rebuild refuses before it touches anything (documents: only with every store)."""
import pytest

from pipelines.config import parse_config
from pipelines.errors import RebuildRefused
from pipelines.rebuild import phases as rebuild
from tests.unit.pipelines.documents.test_document_specs import config


def test_a_document_is_rebuilt_only_with_every_store(tmp_path):
    cfg = parse_config(config(spark={"checkpoint_dir": str(tmp_path)}))
    with pytest.raises(RebuildRefused, match="rebuild all"):
        rebuild.make_plan(cfg, "search", "orders")
    with pytest.raises(RebuildRefused, match="not in the config's tables"):
        rebuild.make_plan(cfg, "search", "public.nothing")
