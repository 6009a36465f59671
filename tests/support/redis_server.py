"""A Redis server of a test's own (the binary `scripts/setup` installs), on a free loopback port:
for tests of the cache's scripts that need no other server of the stack."""
from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from contextlib import contextmanager
from typing import Iterator

from tests.support.ports import free_port


@contextmanager
def private_redis() -> Iterator[str]:
    """The URL of a fresh, unpersisted Redis (database 0; others for a rebuild's spare), stopped after."""
    import redis

    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed: run scripts/setup")
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="cdckit-test-redis-")
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", workdir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis.from_url(url).ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"redis-server did not start on port {port}") from None
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)
