"""The REST client's error typing and 409 retry, against a tiny scripted HTTP server."""
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from connectors.connect_client import (ConnectClient, ConnectConflict, ConnectNotFound, ConnectRequestError,
                                       ConnectServerError, ConnectUnreachable)


class Scripted(BaseHTTPRequestHandler):
    script: list = []
    seen: list = []

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.seen.append((self.command, self.path, body))
        status, payload = self.script.pop(0) if self.script else (200, {})
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = HTTPServer(("127.0.0.1", 0), Scripted)
    Scripted.script, Scripted.seen = [], []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd, ConnectClient(f"http://127.0.0.1:{httpd.server_port}", timeout_s=2, conflict_retries=3)
    httpd.shutdown()


def test_status_parses_tasks_and_traces(server):
    _, client = server
    Scripted.script = [(200, {"name": "c", "connector": {"state": "RUNNING", "worker_id": "w"},
                              "tasks": [{"id": 0, "state": "FAILED", "worker_id": "w", "trace": "boom"}]})]
    st = client.status("c")
    assert st.state == "RUNNING" and st.tasks[0].trace == "boom" and not st.healthy


def test_409_is_retried_then_succeeds(server):
    _, client = server
    Scripted.script = [(409, {"message": "rebalance"}), (409, {"message": "rebalance"}), (201, {"name": "c"})]
    assert client.put_config("c", {"a": "b"}) == {"name": "c"}
    assert len(Scripted.seen) == 3


def test_409_that_persists_is_a_conflict(server):
    _, client = server
    Scripted.script = [(409, {"message": "rebalance"})] * 4
    with pytest.raises(ConnectConflict):
        client.pause("c")


@pytest.mark.parametrize("status,kind", [(404, ConnectNotFound), (400, ConnectRequestError),
                                         (500, ConnectServerError)])
def test_errors_are_typed(server, status, kind):
    _, client = server
    Scripted.script = [(status, {"message": "nope"})]
    with pytest.raises(kind, match="nope"):
        client.get("c")


def test_missing_connector_config_is_none(server):
    _, client = server
    Scripted.script = [(404, {"message": "not found"})]
    assert client.get_config("c") is None


def test_validate_collects_field_errors(server):
    _, client = server
    Scripted.script = [(200, {"configs": [{"value": {"name": "slot.name", "errors": ["bad slot"]}},
                                          {"value": {"name": "x", "errors": []}}]})]
    assert client.validate("io.debezium.connector.postgresql.PostgresConnector", {}) == ["slot.name: bad slot"]
    assert Scripted.seen[0][1] == "/connector-plugins/PostgresConnector/config/validate"


def test_unreachable_names_the_endpoint():
    client = ConnectClient("http://127.0.0.1:1", timeout_s=1)
    with pytest.raises(ConnectUnreachable, match="127.0.0.1:1"):
        client.list()


@pytest.mark.parametrize("offset,over", [
    ({}, False),                                                        # nothing committed yet
    ({"ts_usec": 0}, False),                                            # a notification's, before the first row
    ({"last_snapshot_record": False, "lsn": 1111781856, "txId": 1986612, "ts_usec": 1795800943145381,
      "snapshot": "INITIAL"}, False),                                   # a snapshot row's
    ({"last_snapshot_record": True, "lsn": 1111781856, "snapshot": True}, False),   # its last row's
    ({"lsn": 1111790000, "lsn_proc": 1111790000, "txId": 1986620, "ts_usec": 1795800999000000}, True),  # streaming
])
def test_the_snapshot_is_over_only_at_a_streamed_position(server, offset, over):
    """Offsets as Connect 4.3 answered them for a Debezium 3.7 connector during a bootstrap."""
    _, client = server
    Scripted.script = [(200, {"offsets": [{"partition": {"server": "b91381b"}, "offset": offset}] if offset else []})]
    assert client.snapshot_committed("b91381b-postgres") is over
