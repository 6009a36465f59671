"""The compose Postgres creates the demo table the compose config syncs (a fresh stack has
something to sync, and `bootstrap` finds its table), and the job check reads the sync's metrics."""
from __future__ import annotations

import importlib.util
import re

from pipelines.config import load_config
from tests.support.compose_tools import COMPOSE_DIR, rendered

INITDB = COMPOSE_DIR / "initdb"


def _seed_sql() -> str:
    files = sorted(INITDB.glob("*.sql"))
    assert files, "no init SQL in compose/initdb"
    return "\n".join(f.read_text() for f in files)


def test_initdb_folder_is_mounted_where_postgres_runs_it():
    stack = rendered(COMPOSE_DIR / ".env.example")
    mounts = {m["target"]: m for m in stack["services"]["postgres"]["volumes"]}
    assert mounts["/docker-entrypoint-initdb.d"]["source"] == str(INITDB)
    assert mounts["/docker-entrypoint-initdb.d"]["read_only"]


def test_every_synced_table_is_created_with_a_primary_key_and_filled(monkeypatch):
    for name in ("CDCKIT_CDC_PASSWORD", "CDCKIT_READER_PASSWORD", "OPENSEARCH_PASSWORD", "REDIS_PASSWORD"):
        monkeypatch.setenv(name, "x")
    cfg = load_config(COMPOSE_DIR / "config" / "cdckit.yaml")
    sql = _seed_sql()
    for table in cfg.tables:
        create = re.search(rf"CREATE TABLE IF NOT EXISTS {re.escape(table.name)} \((.*?)\);", sql, re.S)
        assert create, f"{table.name} is not created by compose/initdb"
        key = re.search(r"(\w+) \w+ PRIMARY KEY", create.group(1))
        assert key, f"{table.name} has no primary key"
        assert set(re.findall(r"\{(\w+)\}", table.redis_key)) <= {key.group(1)}
        assert re.search(rf"INSERT INTO {re.escape(table.name)}\b", sql), f"{table.name} is not filled"


def test_the_seed_is_the_quickstarts_demo_table():
    from tests.support.stack import ROOT

    quickstart = (ROOT / "scripts" / "quickstart").read_text()
    columns = re.search(r"public\.customers \((id serial PRIMARY KEY.*?)\)\"", quickstart, re.S).group(1)
    normalized = re.sub(r"[\s\"]+", " ", columns).strip()
    seed = re.sub(r"\s+", " ", re.search(r"public\.customers \((.*?)\);", _seed_sql(), re.S).group(1)).strip()
    assert seed == normalized


def _job_health():
    spec = importlib.util.spec_from_file_location("job_health", COMPOSE_DIR / "job_health.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_job_health_reads_the_age_of_the_last_batch():
    job_health = _job_health()
    text = ("# HELP cdckit_last_batch_timestamp_seconds when the last batch finished\n"
            "# TYPE cdckit_last_batch_timestamp_seconds gauge\n"
            "cdckit_last_batch_timestamp_seconds 1.7e+09\n")
    assert job_health.last_batch_age(text, 1.7e9 + 12) == 12
    assert job_health.last_batch_age(text.replace("1.7e+09", "0.0"), 1.7e9) is None   # no batch yet
    assert job_health.last_batch_age("cdckit_records_total 3.0\n", 1.7e9) is None


def test_job_health_fails_when_the_metrics_do_not_answer(monkeypatch, capsys):
    job_health = _job_health()
    monkeypatch.setenv("CDCKIT_METRICS_PORT", "1")   # nothing listens on port 1
    assert job_health.main() == 1
    assert "do not answer" in capsys.readouterr().out
