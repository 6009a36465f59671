"""Named crash points for the fault drills: with CDCKIT_CRASH_AT=<name> the process is killed
(SIGKILL: no cleanup, no state written) when it reaches that point. Unset, a point costs a lookup."""
from __future__ import annotations

import os
import signal


def crash_point(name: str) -> None:
    if os.environ.get("CDCKIT_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
