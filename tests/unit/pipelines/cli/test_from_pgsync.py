"""`cdckit config from-pgsync`: the converted config is written (and `config check` takes it), or
nothing is written and every part without an equivalent is named (the real entry point)."""
import json

import yaml

from tests.support.integration import cli
from tests.unit.pipelines.documents.test_pgsync_schema import SOCIAL


def test_a_schema_is_written_as_a_config_config_check_accepts(tmp_path):
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SOCIAL))
    base = tmp_path / "base.yaml"
    base.write_text(yaml.safe_dump({"topic_prefix": "soc", "postgres": {"database": "x", "user": "u",
                                                                         "password": {"env": "PGPW_NOT_SET"}},
                                    "kafka": {"bootstrap_servers": "k:9092"}, "connect": {"url": "http://c:8083"},
                                    "search": {"kind": "opensearch", "url": "http://s:9200"},
                                    "redis": {"url": "redis://r:6379/0"},
                                    "tables": [{"name": "public.old"}]}))    # a base's tables are not carried over
    out = tmp_path / "cdckit.yaml"
    done = cli("config", "from-pgsync", str(schema), "--base", str(base), "--out", str(out), "--no-catalog")
    assert done.returncode == 0, done.stderr
    data = yaml.safe_load(out.read_text())
    assert data["topic_prefix"] == "soc" and data["postgres"]["database"] == "social"
    assert "public.old" not in [t["name"] for t in data["tables"]]
    assert out.read_text().startswith("# Converted from the pgsync schema schema.json")
    check = cli("config", "check", "-c", str(out), env={"PGPW_NOT_SET": "x"})
    assert check.returncode == 0, check.stderr


def test_a_schema_with_parts_without_an_equivalent_writes_nothing_and_names_them(tmp_path):
    schema = tmp_path / "schema.json"
    bad = [dict(SOCIAL[0], plugins=["Hero"])]
    bad[0]["nodes"] = dict(bad[0]["nodes"], columns=["name", "doc->x"])
    schema.write_text(json.dumps(bad))
    out = tmp_path / "cdckit.yaml"
    done = cli("config", "from-pgsync", str(schema), "--out", str(out), "--no-catalog")
    assert done.returncode == 2 and not out.exists()
    assert "schema.json: [0].plugins" in done.stderr and "schema.json: [0].nodes.columns[1]" in done.stderr


def test_meta_asks_for_pgsyncs_meta_on_every_document(tmp_path):
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SOCIAL))
    out = tmp_path / "cdckit.yaml"
    plain = cli("config", "from-pgsync", str(schema), "--out", str(out), "--no-catalog")
    assert plain.returncode == 0, plain.stderr
    assert all("meta" not in d for d in yaml.safe_load(out.read_text())["documents"])
    done = cli("config", "from-pgsync", str(schema), "--out", str(out), "--no-catalog", "--meta")
    assert done.returncode == 0, done.stderr
    assert all(d["meta"] is True for d in yaml.safe_load(out.read_text())["documents"])
