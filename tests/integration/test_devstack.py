"""`devstack up` is idempotent and fast enough; `down` leaves none of its processes behind."""
import time

import pytest

from pipelines.devstack import processes, stack
from pipelines.devstack.settings import StackSettings

pytestmark = pytest.mark.integration
PORTS = {"postgres": 55632, "kafka": 59292, "connect": 58283, "redis": 56579, "search": 59400}


def test_up_twice_then_down():
    from tests.conftest import server_state_dir

    settings = StackSettings(state_dir=server_state_dir("cdckit-devstack-test-"), ports=PORTS)
    started = time.monotonic()
    try:
        states = stack.up(settings, say=lambda _: None)
        assert time.monotonic() - started < 90
        assert all(s.healthy for s in states), states
        pids = {s.name: s.pid for s in states}
        again = stack.up(settings, say=lambda _: None)
        assert {s.name: s.pid for s in again} == pids  # nothing restarted
    finally:
        stack.down(settings, say=lambda _: None)
        __import__("shutil").rmtree(settings.state_dir, ignore_errors=True)
    assert not any(processes.alive(pid) for pid in pids.values())
    assert not any(processes.port_in_use(port) for port in PORTS.values())
    assert all(s.pid is None and not s.healthy for s in stack.status(settings))


def test_port_taken_by_someone_else_is_refused(tmp_path):
    import socket

    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        ports = dict(PORTS, redis=squatter.getsockname()[1])
        with pytest.raises(stack.DevstackError, match="redis: port .* is taken"):
            stack.up(StackSettings(state_dir=tmp_path / "s", ports=ports), say=lambda _: None)
