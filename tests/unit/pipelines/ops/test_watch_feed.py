"""The live view's fetching: the endpoint from the config, failures as a line, slow counts throttled."""
import copy

import requests

from pipelines.config import parse_config
from pipelines.ops import watch_feed as wf
from tests.support.configs import BASE


def config(**fields):
    return parse_config({**copy.deepcopy(BASE), **fields})


class Resp:
    def __init__(self, text):
        self.text = text

    def raise_for_status(self):
        pass


def test_the_endpoint_from_the_config():
    assert wf.metrics_url(config()) == "http://127.0.0.1:9464/metrics"
    assert wf.metrics_url(config(metrics_host="0.0.0.0", metrics_port=9000)) == "http://127.0.0.1:9000/metrics"
    assert wf.metrics_url(config(metrics_host="::1")) == "http://[::1]:9464/metrics"
    assert wf.metrics_url(config(metrics_port=0)) is None
    assert wf.shown_url("http://user:s3cret@host:9464/metrics") == "http://host:9464/metrics"


def test_a_silent_endpoint_is_one_line_and_slow_work_is_throttled(monkeypatch):
    now = [100.0]
    calls = []

    def get(url, timeout):
        if now[0] < 103:
            raise requests.ConnectionError("refused")
        return Resp('cdckit_connector_running 1.0\n')

    feed = wf.Feed(config(), "http://u:pw@h:9464/metrics", slow_s=10, get=get, clock=lambda: now[0],
                   background=False)
    monkeypatch.setattr(feed, "slow", lambda scrape: calls.append(scrape) or feed._publish(kafka_lag={"public.customers": 3}))
    scrape, fetched = feed.sample()
    assert scrape is None
    assert fetched.error == "metrics endpoint http://h:9464/metrics does not answer (ConnectionError); retrying"
    assert fetched.kafka_lag == {"public.customers": 3}
    now[0] = 104.0
    scrape, fetched = feed.sample()
    assert scrape.value("cdckit_connector_running") == 1 and fetched.error is None
    assert len(calls) == 1 and fetched.kafka_lag == {"public.customers": 3}  # counted at most every 10 s
    now[0] = 111.0
    feed.sample()
    assert len(calls) == 2 and calls[1] is not None


def test_fallbacks_are_asked_only_for_what_the_metrics_lack(monkeypatch, tmp_path):
    feed = wf.Feed(config(spark={"checkpoint_dir": str(tmp_path / "absent")}), "http://h/metrics",
                   get=lambda url, timeout: Resp(""), background=False)
    asked = []
    monkeypatch.setattr(feed, "_counts", lambda counts, problems: asked.append("counts"))
    monkeypatch.setattr(feed, "_connector", lambda: asked.append("connector"))
    monkeypatch.setattr(feed, "_slot", lambda: asked.append("slot"))
    scrape, fetched = feed.sample()
    assert asked == ["connector", "slot", "counts"]
    assert fetched.kafka_lag == {}  # no checkpoint visible from here: unknown, not guessed
    asked.clear()
    feed.slow(wf.parse_scrape("cdckit_connector_running 1.0\ncdckit_slot_active 0.0\n", 0.0))
    assert asked == ["counts"]
