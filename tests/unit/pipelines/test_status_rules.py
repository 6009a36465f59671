"""`cdckit status` is unhealthy while dead letters stand unsettled and when a store holds far fewer
entries than Postgres has rows (issue 37: "healthy" beside `search docs 161` and `postgres ~48884`)."""
from contextlib import contextmanager

from connectors.kafka.dead_letter_topic import LetterTally
from pipelines.config import parse_config
from pipelines.ops import status
from pipelines.status_rules import (SHORTFALL_MIN_ROWS, far_below, letter_problem, pending_by_table,
                                        shortfall_problem)
from pipelines.state import letters_settled as settled
from tests.support.configs import BASE


def test_far_below_means_under_90_percent_of_a_table_of_a_thousand_rows_or_more():
    assert far_below(161, 48_884) and far_below(0, 1_000)
    assert not far_below(44_000, 48_884)            # 90 %: an estimate's swing, a lag
    assert not far_below(0, SHORTFALL_MIN_ROWS - 1)  # small tables: the empty-store warning only
    assert not far_below(None, 48_884) and not far_below(161, None)


def test_letters_are_counted_per_table_with_the_first_reason():
    tables = {"cdc.public.a": "public.a"}
    pending = pending_by_table({"cdc.public.a": 3, "cdc.public.gone": 1}, {"cdc.public.a": "mapper", "cdc.public.gone": "x"},
                               tables.get)
    assert pending == {"public.a": (3, "mapper"), "cdc.public.gone": (1, "x")}
    line = letter_problem("public.a", 48_981, "search rejected document '1': mapper_parsing_exception")
    assert line.startswith("public.a: 48,981 dead letter(s) no `cdckit dlq replay` has settled")
    assert "`cdckit dlq list`" in line
    line = shortfall_problem("public.a", "search_docs", 161, 48_884, exact=False)
    assert "search docs 161 is far below Postgres' ~48,884 rows" in line and "`cdckit verify --table public.a`" in line


class FakeConn:
    def __init__(self, rows):
        self.rows, self.asked = rows, []

    def execute(self, sql, *args):
        self.asked.append(sql)
        return self

    def fetchone(self):
        return (self.rows,)


def fake_postgres(monkeypatch, rows):
    conn = FakeConn(rows)

    @contextmanager
    def connect(kwargs):
        yield conn

    monkeypatch.setattr("connectors.postgres.connect", connect)
    return conn


def test_a_store_far_below_the_estimate_is_counted_exactly_then_unhealthy(monkeypatch):
    conn = fake_postgres(monkeypatch, 48_884)
    report = status.Report()
    row = {"postgres_rows_estimate": 48_000, "search_docs": 161, "cache_keys": 48_884}
    status._shortfalls(parse_config(BASE), report, "public.customers", "public.customers", row)
    assert conn.asked == ["SELECT count(*) FROM public.customers"] and row["postgres_rows"] == 48_884
    assert not report.healthy
    [problem] = report.problems
    assert "search docs 161 is far below Postgres' 48,884 rows" in problem


def test_an_estimate_a_delete_left_behind_is_corrected_by_the_exact_count(monkeypatch):
    fake_postgres(monkeypatch, 150)   # reltuples still says 48,000 after a large DELETE
    report = status.Report()
    status._shortfalls(parse_config(BASE), report, "public.customers", "public.customers",
                       {"postgres_rows_estimate": 48_000, "search_docs": 150, "cache_keys": 150})
    assert report.healthy and not report.problems


def test_an_empty_store_of_a_small_table_stays_a_warning(monkeypatch):
    conn = fake_postgres(monkeypatch, 0)
    report = status.Report()
    status._shortfalls(parse_config(BASE), report, "public.customers", "public.customers",
                       {"postgres_rows_estimate": 20, "search_docs": 0, "cache_keys": 20})
    assert report.healthy and conn.asked == []
    assert report.warnings == ["public.customers: search docs is empty but Postgres has ~20 rows"]


def tally(monkeypatch, end, per_topic, reasons, seen):
    def fake_tally(conf, topic, start, end_, *a, **kw):
        seen.append(start)
        return LetterTally(start, end_, dict(per_topic), dict(reasons), read=sum(per_topic.values()))

    monkeypatch.setattr("connectors.kafka.dead_letter_topic.topic_end", lambda conf, topic: end)
    monkeypatch.setattr("connectors.kafka.dead_letter_topic.tally_letters", fake_tally)


def test_letters_past_the_replay_mark_make_status_unhealthy(monkeypatch, tmp_path):
    cfg = parse_config({**BASE, "spark": {"checkpoint_dir": str(tmp_path)}})
    topic = cfg.topic_for(cfg.tables[0])
    seen = []
    tally(monkeypatch, 50, {topic: 40}, {topic: "mapper_parsing_exception"}, seen)
    settled.record_settled(tmp_path, 10)
    report = status.Report()
    status._dead_letters(cfg, report)
    assert seen == [10] and not report.healthy
    assert report.tables[cfg.tables[0].name]["dead_letters_pending"] == 40
    assert report.dead_letters == {"topic": cfg.dead_letter_topic, "end": 50, "settled_below": 10, "pending": 40}
    assert "40 dead letter(s) no `cdckit dlq replay` has settled (first: mapper_parsing_exception)" in report.problems[0]


def test_letters_all_settled_by_a_replay_leave_status_healthy(monkeypatch, tmp_path):
    cfg = parse_config({**BASE, "spark": {"checkpoint_dir": str(tmp_path)}})
    seen = []
    tally(monkeypatch, 50, {}, {}, seen)
    settled.record_settled(tmp_path, 50)
    report = status.Report()
    status._dead_letters(cfg, report)
    assert report.healthy and seen == [] and report.dead_letters["pending"] == 0


def test_a_mark_past_a_recreated_topics_end_counts_every_letter(monkeypatch, tmp_path):
    cfg = parse_config({**BASE, "spark": {"checkpoint_dir": str(tmp_path)}})
    seen = []
    tally(monkeypatch, 3, {"x": 3}, {"x": "r"}, seen)
    settled.record_settled(tmp_path, 900)
    report = status.Report()
    status._dead_letters(cfg, report)
    assert seen == [0] and not report.healthy


def test_kafka_not_answering_is_a_warning_not_a_verdict(monkeypatch, tmp_path):
    cfg = parse_config({**BASE, "spark": {"checkpoint_dir": str(tmp_path)}})

    def down(conf, topic):
        raise RuntimeError("broker down")

    monkeypatch.setattr("connectors.kafka.dead_letter_topic.topic_end", down)
    report = status.Report()
    status._dead_letters(cfg, report)
    assert report.healthy and report.warnings == ["dead letters not counted: RuntimeError: broker down"]


def test_a_rebuild_that_refused_its_switch_is_said(tmp_path):
    from pipelines.state import rebuild_state
    cfg = parse_config({**BASE, "spark": {"checkpoint_dir": str(tmp_path)}})
    verdict = {"count": 4, "by": {"bulk": 4}, "accepted": 0, "switch": False}
    rebuild_state.save(tmp_path, rebuild_state.RebuildState({"rebuild_id": "r1"}, rebuild_state.Targets(), "done",
                                                            dead_letters=verdict))
    report = status.Report()
    status._rebuild(cfg, report)
    assert report.warnings[0].startswith("rebuild r1 did not switch: 4 records of its replay were dead-lettered")
    rebuild_state.save(tmp_path, rebuild_state.RebuildState({"rebuild_id": "r2"}, rebuild_state.Targets(), "done",
                                                            dead_letters={**verdict, "switch": True}))
    report = status.Report()
    status._rebuild(cfg, report)
    assert report.warnings == []
