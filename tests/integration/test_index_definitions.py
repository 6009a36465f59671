"""Index definitions against the real engine: the mapping derived from the catalog's column types
is what the index gets, `cdckit index show` finds no difference, and a config edit shows as one (in
`index show` and in `status`) until a rebuild applies it."""
import uuid

import pytest

from pipelines.config import parse_config
from tests.support.integration import cli, cli_json, pg, write_config

pytestmark = pytest.mark.integration


def test_index_created_from_the_catalog_then_a_config_edit_shows(stack, tmp_path):
    from derived.sinks.markers import search_marker
    from pipelines.apply.stores import search_engine
    from pipelines.streaming.job import LiveConfig

    name = f"idx{uuid.uuid4().hex[:8]}"
    table = f"public.{name}"
    with pg(stack) as conn:
        conn.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, born date, seen timestamp(3), at timestamptz, "
                     "doc jsonb, amount numeric(12,2), price numeric(12,2), note varchar(40))")
    data = stack.config([{"name": table, "index": name, "redis_key": f"{name}:{{id}}", "numeric_as_number": ["amount"],
                          "rename": {"note": "remark"}}])
    cfg = parse_config(data)
    engine = search_engine(cfg)
    try:
        LiveConfig(cfg).check_stores(fresh=True)  # the job's path: a first generation from the catalog
        live = engine.index_definition(name)
        props = live["mappings"]["properties"]
        assert {f: props[f]["type"] for f in ("born", "seen", "at")} == {"born": "date", "seen": "date", "at": "date"}
        assert props["doc"]["type"] == "flat_object"  # json: flattened, the default (never refused: README)
        assert props["amount"]["type"] == "scaled_float" and props["price"]["type"] == "keyword"
        assert props["remark"]["type"] == "text" and props["id"]["type"] == "long"
        assert live["settings"]["index"]["gc_deletes"] == f"{cfg.search.deleted_version_ttl_s}s"
        assert live["settings"]["index"]["number_of_replicas"] == "0"

        path = write_config(tmp_path, data)
        shown = cli("index", "show", table, "-c", str(path))
        assert shown.returncode == 0, shown.stdout + shown.stderr
        assert "no difference" in shown.stdout

        data["tables"][0]["search"] = {"settings": {"refresh_interval": "7s"}}
        write_config(tmp_path, data)
        shown = cli("index", "show", table, "-c", str(path))
        assert shown.returncode == 1, shown.stdout + shown.stderr
        assert "differs: settings index.refresh_interval: config 7s, live not set" in shown.stdout

        _, report = cli_json("status", "-c", str(path))
        assert any(f"{table}: index {name}_v1 differs" in w and f"cdckit rebuild search --table {table}" in w
                   for w in report["warnings"]), report["warnings"]
    finally:
        for index in engine.alias_targets(name) + [search_marker(cfg.topic_prefix)]:
            if engine.index_exists(index):
                engine.delete_index(index)
        with pg(stack) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
