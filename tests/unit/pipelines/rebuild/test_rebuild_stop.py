"""A rebuild asked to stop: bulk tasks that begin afterwards leave their partition to a rerun. The
request reaches tasks through the progress board (a Kafka group in production; a fake here)."""
import pyarrow as pa

from pipelines.rebuild.spark_jobs import bulk_fn


class FakeBoard:
    def __init__(self):
        self.stopped, self.closed = set(), 0

    def request_stop(self, anchor, on=True):
        (self.stopped.add if on else self.stopped.discard)(anchor)

    def stop_requested(self, anchor, timeout_s=10):
        return anchor in self.stopped

    def close(self):
        self.closed += 1


def test_bulk_tasks_begun_after_a_stop_request_skip_their_partition():
    board = FakeBoard()
    ranges = pa.RecordBatch.from_pylist([{"topic": "t", "partition": 0, "start": 0, "end": 10}])
    board.request_stop(("t", 0))
    # No config, stores or Kafka are touched: the task yields no result row for its partition.
    assert list(bulk_fn(b"{}", None, "r1", ("t", 0), boards=lambda _c, _r: board)(iter([ranges]))) == []
    assert board.closed == 1
    board.request_stop(("t", 0), False)
    assert not board.stop_requested(("t", 0))
