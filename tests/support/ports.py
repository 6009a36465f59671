"""Free loopback ports for a test's own servers. Fixed ports in Linux's ephemeral range (32768-60999)
can be taken at any moment by an outgoing connection's local end ("Address already in use" on a busy
run), so a server a test starts on its own gets a port the kernel says is free now."""
from __future__ import annotations

import socket
from contextlib import ExitStack


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def free_ports(names) -> dict[str, int]:
    """One free port per name, all different (held together while they are picked)."""
    with ExitStack() as held:
        socks = {n: held.enter_context(socket.socket()) for n in names}
        for sock in socks.values():
            sock.bind(("127.0.0.1", 0))
        return {n: sock.getsockname()[1] for n, sock in socks.items()}
