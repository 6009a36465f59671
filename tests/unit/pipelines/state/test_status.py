import os
from types import SimpleNamespace

from pipelines.state.status import claim_status, read_status, status_path, write_status
from pipelines.state.json_files import write_json


def test_a_starting_pipeline_names_itself_and_keeps_the_last_batch(tmp_path):
    claim_status(tmp_path)
    assert read_status(tmp_path) is None  # no batch yet: nothing to claim, `status` says so
    write_status(tmp_path, 7, SimpleNamespace(records=3), 0.5)
    body = read_status(tmp_path)
    write_json(status_path(tmp_path), {**body, "pid": 1, "host": "elsewhere"})  # applied by an earlier process
    claim_status(tmp_path)
    assert read_status(tmp_path) == body and body["pid"] == os.getpid() and body["batch_id"] == 7
