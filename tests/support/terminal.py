"""A real terminal for the CLI: a tmux session on a private server, so Ctrl-C arrives as a person
sends it (SIGINT to the whole foreground process group, the Spark JVM's too if it were there)."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
import uuid

from tests.support.stack import ROOT

EXIT_MARK = "CDCKIT-EXIT="


class Terminal:
    def __init__(self, width: int = 200, height: int = 50):
        # A server of its own: a server shared by terminals exits when the last session is killed,
        # and the next terminal's new-session could reach it mid-exit (seen once in CI: exit 1).
        self.name = f"t{uuid.uuid4().hex[:6]}"
        self.socket = f"cdckit-test-{os.getpid()}-{self.name}"
        self.width, self.height = width, height

    def _tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=True).stdout

    def start(self, *cli_args: str) -> None:
        env = {"PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        command = (f"cd {shlex.quote(str(ROOT))} && {exports} {shlex.quote(sys.executable)} -m pipelines.cli "
                   f"{' '.join(shlex.quote(a) for a in cli_args)}; echo {EXIT_MARK}$?; sleep 3600")
        self._tmux("new-session", "-d", "-s", self.name, "-x", str(self.width), "-y", str(self.height), command)

    def screen(self) -> str:
        """Everything the terminal showed, wrapped lines joined."""
        return self._tmux("capture-pane", "-p", "-J", "-S", "-5000", "-t", self.name)

    def ctrl_c(self) -> None:
        self._tmux("send-keys", "-t", self.name, "C-c")

    def wait_for(self, pattern: str, timeout_s: float = 120) -> re.Match:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = re.search(pattern, self.screen())
            if found:
                return found
            time.sleep(0.3)
        raise TimeoutError(f"{pattern!r} not on the terminal within {timeout_s} s:\n{self.screen()[-4000:]}")

    def exit_code(self, timeout_s: float = 120) -> int:
        return int(self.wait_for(rf"{EXIT_MARK}(\d+)", timeout_s).group(1))

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)

    def __enter__(self) -> "Terminal":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
