"""The benchmark page's headline table is composed from the scripts' JSON results as they write them."""
from benchmarks import summary

CPU = {
    "at": "2026-11-27T03:45:00Z", "machine_detail": {"cores": 2, "model": "Xeon", "memory_gib": 23.5},
    "phases": [
        {"rate": 0, "seconds": 20.0, "window_s": 20.1, "changes": 0, "changes_per_s": 0.0, "visible": {},
         "cores": {"cdckit command": 0.005, "spark driver": 0.03, "python workers": 0.01}, "us_per_change": {},
         "cdckit_vs_debezium_cpu": 1.8},
        {"rate": 2000, "seconds": 30.0, "window_s": 30.5, "changes": 60000, "changes_per_s": 2000.0,
         "visible": {"p50": 0.58, "p99": 0.99}, "cores": {}, "cdckit_vs_debezium_cpu": 1.51,
         "us_per_change": {"cdckit command": 20.0, "spark driver": 144.0, "python workers": 67.0,
                           "kafka connect": 140.0}},
    ],
    "fit": {"per_batch_ms": 142.0, "per_change_us": 51.8},
    "memory": {"rss_peak_mb": {"idle": {"spark driver": 900, "redis": 10}, "2000": {"spark driver": 1100}}},
}
BOOT = {"at": "2026-11-27T04:00:00Z", "rows": 1000000, "by_run": {
    "cache": {"snapshot_into_kafka_s": 50.0, "snapshot_rows_per_s": 20000, "synced_s": 55.0, "rows_per_s": 18182,
              "every_row": True},
    "search": {"snapshot_into_kafka_s": 50.0, "snapshot_rows_per_s": 20000, "synced_s": 100.0, "rows_per_s": 10000,
               "every_row": False}}}
RTM = {"at": "2026-11-27T04:10:00Z", "rate": 500, "modes": [
    {"mode": "real_time", "started": True, "written": 8100, "sent": 15001, "latency_s": {"p50": 4.4, "p99": 8.3}},
    {"mode": "micro_batch", "started": True, "written": 15001, "sent": 15001, "latency_s": {"p50": 0.43, "p99": 0.9}},
    {"mode": "real_time_jvm_sink", "started": True, "written": 15001, "sent": 15001,
     "latency_s": {"p50": 0.001, "p99": 0.05}},
    {"mode": "real_time_arrow_udf", "started": False, "error": "STREAMING_REAL_TIME_MODE.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST"}]}


FIRST = {"at": "2026-11-27T07:21:00Z", "rows": 10000, "best_synced_s": 6.07, "runs": [
    {"synced_s": 11.83, "every_row": True}, {"synced_s": 5.35, "every_row": False}, {"synced_s": 6.07, "every_row": True}]}


PGSYNC = {"at": "2026-11-28T03:30:00Z", "rows": 200000, "rate": 200, "pgsync": "7.3.0",
          "pgsync_initial_sync_s": 20.0, "cdckit_initial_sync_s": 18.0,
          "pgsync_update_latency_s": {"p50": 0.8, "p99": 2.0}, "cdckit_update_latency_s": {"p50": 0.6, "p99": 1.5},
          "pgsync_deletes": {"rows": 500, "rounds": 5, "all_gone_s": 1.0},
          "cdckit_deletes": {"rows": 500, "rounds": 5, "all_gone_s": 0.5},
          "own_cpu_s": {"pgsync": 4.0, "cdckit": 12.0, "cdckit_with_connect_and_broker": 22.0}}


def test_the_table_states_the_machine_and_every_headline_figure():
    text = summary.table(CPU, BOOT, RTM, FIRST, PGSYNC)
    assert text.startswith("Machine: 2 cores (Xeon), 23.5 GiB")
    assert "| snapshot: Debezium into Kafka, 1,000,000 rows | 20,000 rows/s |" in text
    assert "| bootstrap, Redis alone: start to synced | 55.0 s, 18,182 rows/s (1.10x the snapshot's time) |" in text
    assert "ROWS MISSING" in text.split("search index alone")[1].splitlines()[0]   # a run that lost rows says so
    # cdckit's own CPU: the command's Python process, its Spark driver JVM and the Python workers.
    assert ("| at 2,000 commits/s: visible p50 / p99; cdckit CPU per change; vs Debezium | 0.58 / 0.99 s; 231 µs; "
            "1.51x |") in text
    assert "| idle (nothing changing): cdckit cores | 0.045 |" in text
    assert "spark driver 1,100, redis 10" in text
    assert "real-time, Python ForeachWriter p50 4.4 / p99 8.3 s, 8,100 of 15,001 written" in text
    assert "real-time, Spark's Kafka sink (no Python) p50 0.001 / p99 0.05 s, 15,001 of 15,001 written" in text
    assert "real-time, Arrow UDF (Spark's allowlist check off): refused (STREAMING_REAL_TIME_MODE" in text
    assert ("| first minute: 10,000 rows into both stores by `bootstrap --once`, best of 3 (each run's figure) | "
            "6.07 s (11.83, 5.35, 6.07 s), ROWS MISSING in 1 run(s) |") in text
    assert ("| cdckit vs pgsync 7.3.0, same stack, 200,000 rows, search only, updates at 200/s | initial sync "
            "18.0 s vs 20.0 s (0.90x); update p50 0.6 s vs 0.8 s (0.75x), p99 1.5 s vs 2.0 s (0.75x); 500 rows "
            "deleted in one transaction, gone in 0.5 s vs 1.0 s (0.50x) (median of 5); CPU of its own processes "
            "12.0 s vs 4.0 s (3.00x); with Connect and the broker 22.0 s |") in text
    assert "beside_pgsync 2026-11-28" in text.splitlines()[0]
    # The updates' first seconds (each tool's start) are reported apart, not hidden.
    warm = {**PGSYNC, "pgsync_update_latency_s": {**PGSYNC["pgsync_update_latency_s"], "warmup": {"seconds": 10,
                                                                                                   "p99": 2.1}},
            "cdckit_update_latency_s": {**PGSYNC["cdckit_update_latency_s"], "warmup": {"seconds": 10, "p99": 3.2}}}
    assert ("p99 1.5 s vs 2.0 s (0.75x) (after 10 s of them; in those, p99 3.2 s vs 2.1 s (1.52x)); 500 rows"
            in summary.table(CPU, BOOT, RTM, FIRST, warm))


def test_the_readme_block_is_replaced_whole(tmp_path, monkeypatch):
    page = tmp_path / "README.md"
    page.write_text(f"# B\n\n{summary.START}\nold\n{summary.END}\n\nrest\n")
    monkeypatch.setattr(summary, "README", page)
    summary.put_in_readme("new table\n")
    assert page.read_text() == f"# B\n\n{summary.START}\nnew table\n{summary.END}\n\nrest\n"
