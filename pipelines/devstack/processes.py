"""Starting, recording and stopping exactly the processes the stack started.

A pid file holds the pid and the process start time (from /proc), so a recycled pid is never
mistaken for ours and `down` never signals a stranger.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 22 (starttime) counted after the ')' that closes the command name.
    return stat.rsplit(")", 1)[1].split()[19]


def alive(pid: int) -> bool:
    """Running, or still shutting down: a JVM's main thread exits first (the leader shows as a
    zombie) while its shutdown hooks keep the process, its port and its log for many seconds."""
    try:
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                      if ":" in line)
    except OSError:
        return False
    return not fields.get("State", "").strip().startswith("Z") or int(fields.get("Threads", "1")) > 1


def record(pid_file: Path, pid: int) -> None:
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    pid_file.write_text(f"{pid} {_start_time(pid)}\n")


def recorded_pid(pid_file: Path) -> int | None:
    """The recorded pid if that very process is still running, else None."""
    try:
        pid_s, started = pid_file.read_text().split()
    except (OSError, ValueError):
        return None
    pid = int(pid_s)
    return pid if alive(pid) and _start_time(pid) == started else None


def spawn(argv: list[str], log: Path, pid_file: Path, env: dict[str, str] | None = None,
          cwd: Path | None = None) -> int:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env={**os.environ, **(env or {})}, cwd=cwd)
    record(pid_file, proc.pid)
    return proc.pid


def terminate(pid: int, timeout_s: float = 20.0) -> None:
    """SIGTERM, then SIGKILL if it has not gone within the timeout."""
    for sig, wait in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            _reap(pid)
            if not alive(pid):
                return
            time.sleep(0.1)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


RESERVED_PORTS = Path("/proc/sys/net/ipv4/ip_local_reserved_ports")
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def reserve_ports(ports: list[int]) -> None:
    """Keep the kernel from handing these ports to outgoing connections. The stack's ports lie in
    Linux's ephemeral range (32768-60999): a client connection (or its TIME_WAIT) holding one makes a
    server's bind fail. Needs root; without it nothing changes (best effort)."""
    try:
        current = RESERVED_PORTS.read_text().strip()
        have: set[int] = set()
        for part in filter(None, current.split(",")):
            lo, _, hi = part.partition("-")
            have.update(range(int(lo), int(hi or lo) + 1))
        first, last = map(int, EPHEMERAL_RANGE.read_text().split())
        missing = sorted(p for p in set(ports) - have if first <= p <= last)  # others are never handed out
        if missing:
            RESERVED_PORTS.write_text(",".join(filter(None, [current, *map(str, missing)])) + "\n")
    except (OSError, ValueError):
        pass


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.3)
        return sock.connect_ex((host, port)) == 0


def wait_until(check, timeout_s: float, interval_s: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if check():
                return True
        except Exception:  # noqa: BLE001 - a server that is still starting may answer anything
            pass
        time.sleep(interval_s)
    return False


def log_tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
