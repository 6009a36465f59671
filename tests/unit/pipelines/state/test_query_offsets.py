"""pipelines/state/query_offsets.py: where the stores hold every change up to."""
def test_applied_offsets_are_the_bulk_hand_over_until_the_stream_commits(tmp_path):
    """`bootstrap --once` after a bulk apply never runs the streaming query: verify, status and
    recover read where the bulk handed over; a streaming commit takes over from it."""
    import json

    from pipelines.state.bootstrap_state import SnapshotBulk, write_bulk
    from pipelines.state.checkpoint import CheckpointDir
    from pipelines.state.query_offsets import applied_offsets

    assert applied_offsets(tmp_path) is None
    bulk = SnapshotBulk({"t": {"0": 74, "1": 67}}, [], {}, {})
    write_bulk(tmp_path, bulk)
    assert applied_offsets(tmp_path) is None          # not done: nothing handed over yet
    bulk.done = True
    write_bulk(tmp_path, bulk)
    assert applied_offsets(tmp_path) == {"t": {"0": 74, "1": 67}}
    query = CheckpointDir(tmp_path).query
    (query / "offsets").mkdir(parents=True)
    (query / "commits").mkdir()
    (query / "offsets" / "0").write_text('v1\n{"batchWatermarkMs":0}\n' + json.dumps({"t": {"0": 80, "1": 67}}) + "\n")
    (query / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    assert applied_offsets(tmp_path) == {"t": {"0": 80, "1": 67}}
