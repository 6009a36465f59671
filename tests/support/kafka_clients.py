"""Kafka clients the test process leaves open, traced to the line that made them.

A librdkafka client alive when the broker stops prints "Connect to ... failed" lines after the
suite. `track()` (at session start) makes every Consumer and Producer made in this process
remember where it was created until it is closed; `close_leftovers()` (before the stack stops) names each one
still open and closes it."""
from __future__ import annotations

import traceback
import weakref

_live: "weakref.WeakKeyDictionary[object, str]" = weakref.WeakKeyDictionary()


def _origin() -> str:
    """The innermost frame outside confluent_kafka and this module: who made the client."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        if "confluent_kafka" not in frame.filename and not frame.filename.endswith("kafka_clients.py"):
            return f"{frame.filename}:{frame.lineno} ({frame.name})"
    return "?"


def track() -> None:
    import confluent_kafka

    def tracking(base):
        class Tracked(base):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                _live[self] = _origin()

            def close(self, *args, **kwargs):
                _live.pop(self, None)
                return super().close(*args, **kwargs)

        Tracked.__name__ = Tracked.__qualname__ = base.__name__
        return Tracked

    # Not AdminClient: it has no close (it goes with its last reference), and its __init__ names
    # its own class, which a subclass put in its place would recurse into.
    for module, name in ((confluent_kafka, "Consumer"), (confluent_kafka, "Producer")):
        base = getattr(module, name, None)
        if base is not None and not getattr(base, "_cdckit_tracked", False):
            tracked = tracking(base)
            tracked._cdckit_tracked = True
            setattr(module, name, tracked)


def close_leftovers(timeout_s: float = 5) -> list[str]:
    """Let go of every tracked client still open; one line per client: its kind and where it was
    made. A consumer is closed; a producer's queue is purged (its close waits for deliveries, for
    ever when its broker is gone, as a secure test's is by now). Each gets `timeout_s` at most."""
    import threading

    out = []
    for client, origin in list(_live.items()):
        if type(client).__name__ == "Producer":
            let_go = lambda c=client: (c.purge(), c.flush(0))  # noqa: E731
        else:
            let_go = client.close
        worker = threading.Thread(target=_quietly, args=(let_go,), daemon=True)
        worker.start()
        worker.join(timeout_s)
        out.append(f"{type(client).__name__} made at {origin}")
    _live.clear()
    return out


def _quietly(call) -> None:
    try:
        call()
    except RuntimeError:
        pass  # closed already (before tracking could see it)
