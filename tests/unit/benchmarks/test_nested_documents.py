import inspect

from benchmarks.nested_documents import documents_batches
from pipelines.documents import documents_query

LINE = ("2026-11-29 01:02:03,456 INFO documents: documents batch 41: 1,813 records, 906 documents (0 by shared rows), "
        "search 906 applied/0 stale, cache 906 applied/0 stale, 0.81 s (fold 0.31 s: state load 0.00, rows 0.04, "
        "fold 0.18, save 0.03; stores 0.22 s; schema check 0.01 s; state 3.1 MB, kept by the worker for 1 of 1; "
        "fold task's CPU 0.21 s)")


def test_the_documents_batch_line_is_read_as_the_job_writes_it():
    # the job's format string, so a change to the line shows here
    source = inspect.getsource(documents_query.start)
    assert "kept by the worker for %d of %d; " in source and "fold task's CPU %.2f s)" in source
    got = documents_batches(LINE + "\n" + LINE.replace("batch 41", "rebuild: documents batch 9"))
    assert got["batches"] == 1 and got["state_load_s_median"] == 0.0 and got["state_kept_share"] == 1.0
    assert got["fold_task_s_median"] == 0.31 and got["state_mb_median"] == 3.1
