"""`devstack up` is idempotent (checked on the session's own stack: a second `up` restarts
nothing); `down` leaves none of its processes behind; a port held by another process is refused."""
import pytest

from pipelines.devstack import processes, stack as devstack
from pipelines.devstack.servers import Postgres, Redis
from pipelines.devstack.settings import StackSettings
from tests.support.ports import free_ports

pytestmark = pytest.mark.integration
SERVERS = ("postgres", "kafka", "connect", "redis", "search")


def test_up_again_on_a_running_stack_restarts_nothing(stack):
    if stack.settings is None:
        pytest.skip("the local stack's own processes")
    before = {s.name: s.pid for s in devstack.status(stack.settings)}
    assert all(before.values()), before
    again = devstack.up(stack.settings, say=lambda _: None)
    assert all(s.healthy for s in again), again
    assert {s.name: s.pid for s in again} == before  # nothing restarted


def test_down_stops_every_process_it_finds_and_frees_the_ports():
    """`down` on a stack of which some servers run (Postgres and Redis started, the JVM servers
    not): each running one stops, its port is free, the others are reported not running."""
    from tests.conftest import server_state_dir

    # Free ports, not fixed ones: those are in the ephemeral range, where a connection can hold one.
    ports = free_ports(SERVERS)
    settings = StackSettings(state_dir=server_state_dir("cdckit-devstack-test-"), ports=ports)
    said: list[str] = []
    try:
        settings.logs.mkdir(parents=True, exist_ok=True)
        started = [Postgres(settings), Redis(settings)]
        for server in started:
            server.start()
            assert processes.wait_until(server.healthy, 90), processes.log_tail(server.log)
        pids = {s.name: s.pid() for s in started}
        assert all(pids.values())
        devstack.down(settings, say=said.append)
    finally:
        devstack.down(settings, say=lambda _: None)
        __import__("shutil").rmtree(settings.state_dir, ignore_errors=True)
    assert not any(processes.alive(pid) for pid in pids.values())
    assert not any(processes.port_in_use(port) for port in ports.values())
    assert all(s.pid is None and not s.healthy for s in devstack.status(settings))
    assert sum("stopped" in line for line in said) == 2 and sum("not running" in line for line in said) == 3, said


def test_port_taken_by_someone_else_is_refused(tmp_path):
    import socket

    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        ports = dict(free_ports(SERVERS), redis=squatter.getsockname()[1])
        with pytest.raises(devstack.DevstackError, match="redis: port .* is taken"):
            devstack.up(StackSettings(state_dir=tmp_path / "s", ports=ports), say=lambda _: None)
