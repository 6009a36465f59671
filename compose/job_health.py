"""The cdckit container's job check (its healthcheck runs it after `cdckit connector status`):
healthy when the sync's metrics answer and its last micro-batch finished within
CDCKIT_HEALTH_MAX_BATCH_AGE_S seconds (default 300). Debezium's heartbeat writes a row every
`connect.heartbeat_interval_ms`, so even an idle database gives the job a batch every few seconds;
a job that is wedged, or still starting, has none. Exit 0 healthy, 1 not (with the reason)."""
from __future__ import annotations

import os
import sys
import time
import urllib.request

METRIC = "cdckit_last_batch_timestamp_seconds"


def last_batch_age(metrics_text: str, now: float) -> float | None:
    """Seconds since the last batch finished; None before the first one (the gauge is 0)."""
    for line in metrics_text.splitlines():
        if line.startswith(METRIC + " "):
            value = float(line.split()[1])
            return now - value if value > 0 else None
    return None


def main() -> int:
    port = os.environ.get("CDCKIT_METRICS_PORT", "9464")
    max_age = float(os.environ.get("CDCKIT_HEALTH_MAX_BATCH_AGE_S", "300"))
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
    except OSError as exc:
        print(f"job: metrics on port {port} do not answer: {exc}")
        return 1
    age = last_batch_age(text, time.time())
    if age is None:
        print("job: no batch finished yet")
        return 1
    if age > max_age:
        print(f"job: last batch finished {age:.0f} s ago (more than {max_age:.0f} s)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
