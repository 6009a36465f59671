"""A rebuild asked to stop: bulk tasks that begin afterwards leave their partition to a rerun."""
import pyarrow as pa

from pipelines.spark.rebuild_jobs import bulk_fn
from pipelines.state.checkpoint import RebuildWork
from pipelines.state.rebuild import request_stop, stop_requested


def test_bulk_tasks_begun_after_a_stop_request_skip_their_partition(tmp_path):
    work = RebuildWork(tmp_path / "rebuild" / "r1")
    ranges = pa.RecordBatch.from_pylist([{"topic": "t", "partition": 0, "start": 0, "end": 10}])
    request_stop(work)
    assert stop_requested(work)
    # No config, stores or Kafka are touched: the task yields no result row for its partition.
    assert list(bulk_fn(b"{}", None, str(work.root))(iter([ranges]))) == []
    request_stop(work, False)
    assert not stop_requested(work)
