"""The first stop signal asks for a stop at the next safe point; the second exits at once (130)."""
import signal

import pytest

from pipelines.stopping import StopRequest


def test_first_signal_requests_a_stop_second_exits_at_once(monkeypatch):
    exits = []
    monkeypatch.setattr("pipelines.stopping.os._exit", lambda code: exits.append(code))
    stop = StopRequest()
    stop._on_signal(signal.SIGINT, None)
    assert stop.is_set() and exits == []
    stop._on_signal(signal.SIGTERM, None)
    assert exits == [130]


def test_install_takes_sigint_and_sigterm():
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        stop = StopRequest().install()
        assert signal.getsignal(signal.SIGINT) == stop._on_signal == signal.getsignal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])


@pytest.mark.parametrize("wait", [0.01])
def test_wait_returns_when_requested(wait):
    stop = StopRequest()
    assert stop.wait(wait) is False
    stop.set()
    assert stop.wait(wait) is True
