"""The pause before a restart (pipelines/streaming/restart_pause.py): waited out while what failed stays
away, ended past its minimum once it answers, never held by a probe that hangs, cut by a stop."""
import threading
import time

from pipelines.streaming import restart_pause
from pipelines.streaming.restart_pause import pause, readiness


class Stop:
    def __init__(self, at: float | None = None):
        self.at, self.started = at, time.monotonic()

    def wait(self, seconds: float) -> bool:
        if self.at is not None and time.monotonic() - self.started >= self.at:
            return True
        time.sleep(seconds)
        return False


def timed(*args, **kwargs) -> tuple[bool, float]:
    t0 = time.monotonic()
    stopped = pause(*args, **kwargs)
    return stopped, time.monotonic() - t0


def test_a_cause_that_stays_is_waited_out(monkeypatch):
    monkeypatch.setattr(restart_pause, "PROBE_EVERY_S", 0.05)
    stopped, took = timed(Stop(), 0.6, lambda: False, minimum_s=0.1)
    assert not stopped and 0.6 <= took < 1.2


def test_it_ends_past_the_minimum_once_the_probe_answers(monkeypatch):
    monkeypatch.setattr(restart_pause, "PROBE_EVERY_S", 0.05)
    back = time.monotonic() + 0.3
    stopped, took = timed(Stop(), 30, lambda: time.monotonic() > back, minimum_s=0.1)
    assert not stopped and 0.3 <= took < 2
    back = time.monotonic() + 0.2
    stopped, took = timed(Stop(), 30, lambda: time.monotonic() > back, minimum_s=0.6)   # never before the minimum
    assert not stopped and 0.6 <= took < 2


def test_a_probe_that_never_failed_says_nothing_about_the_cause(monkeypatch):
    """A 429 or a catalog read fails the batch while the stores answer with their markers: the
    pause is waited out (doubling), not cut to its minimum each time."""
    monkeypatch.setattr(restart_pause, "PROBE_EVERY_S", 0.05)
    stopped, took = timed(Stop(), 0.8, lambda: True, minimum_s=0.1)
    assert not stopped and took >= 0.8


def test_a_hanging_probe_holds_neither_the_pause_nor_a_stop(monkeypatch):
    monkeypatch.setattr(restart_pause, "PROBE_EVERY_S", 0.05)
    hang = threading.Event()
    stopped, took = timed(Stop(at=0.5), 30, lambda: hang.wait(60), minimum_s=0.1)
    hang.set()
    assert stopped and took < 2.5


def test_a_probe_that_raises_is_a_cause_still_there(monkeypatch):
    monkeypatch.setattr(restart_pause, "PROBE_EVERY_S", 0.05)
    stopped, took = timed(Stop(), 0.4, lambda: 1 / 0, minimum_s=0.1)
    assert not stopped and took >= 0.4


def test_what_is_probed_follows_the_failure():
    from tests.support.configs import BASE
    from pipelines.config import parse_config

    cfg = parse_config(BASE)
    assert readiness(cfg, "StoreUnavailable: a store lost its data") is not None
    assert readiness(cfg, "KafkaUnavailable: broker down") is not None
    assert readiness(cfg, "ValueError: something else") is None


def test_the_first_two_pauses_end_on_a_probe_that_never_failed(monkeypatch):
    """A store rebuilt (or thawed) before the pause began answers at once: the 5 and 10 s pauses
    end at their minimum; a longer one is waited out (test above)."""
    monkeypatch.setattr(restart_pause, "PROBE_EVERY_S", 0.05)
    stopped, took = timed(Stop(), 0.2, lambda: True, minimum_s=0.1)
    assert not stopped and 0.1 <= took < 0.2
