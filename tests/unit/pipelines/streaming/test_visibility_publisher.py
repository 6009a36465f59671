"""The publisher's round: the topics' ends are fetched from the broker only when the slot moved (a
sample at the same position is never covered sooner), and the position still advances on them."""
from types import SimpleNamespace

from pipelines.streaming.visibility_publisher import VisibilityPublisher


class Broker:
    def __init__(self):
        self.fetches, self.ends = 0, {("p.public.t", 0): 5}

    def partitions(self):
        return sorted(self.ends)

    def high(self, tps):
        self.fetches += 1
        return {tp: self.ends[tp] for tp in tps}


def publisher(lsn: list[int], committed: dict, broker: Broker) -> VisibilityPublisher:
    p = VisibilityPublisher(SimpleNamespace(), interval_s=60)
    p._snapshot_committed = lambda: True
    p._confirmed_lsn = lambda: lsn[0]
    p._marks = lambda: broker
    p._committed = lambda: committed
    published = []
    p._publish = lambda position: (published.append(position), setattr(p, "published", position))
    p.published_positions = published
    return p


def test_ends_are_fetched_only_when_the_slot_moved():
    broker, lsn, committed = Broker(), [100], {"p.public.t": {"0": 3}}
    p = publisher(lsn, committed, broker)
    for _ in range(5):
        assert p.step() == 0              # records below the sample's ends not applied yet
    assert broker.fetches == 1
    committed["p.public.t"]["0"] = 5      # a batch applied them
    assert p.step() == 100
    assert broker.fetches == 1
    lsn[0] = 200                          # a heartbeat moved the slot; nothing new in the topic
    assert p.step() == 200
    assert broker.fetches == 2
    assert p.published_positions == [100, 200]


def test_a_failed_fetch_is_retried_at_the_same_position():
    broker, lsn = Broker(), [100]
    p = publisher(lsn, {"p.public.t": {"0": 5}}, broker)
    real_high = broker.high
    broker.high = lambda tps: (_ for _ in ()).throw(RuntimeError("broker away"))
    try:
        p.step()
    except RuntimeError:
        pass
    broker.high = real_high
    assert p.step() == 100


class Sink:
    """A store as the publisher sees it through the sink protocol."""

    def __init__(self, marked=True, holds=("orders",)):
        self.is_marked, self.held, self.published = marked, set(holds), []

    def marked(self, prefix):
        return self.is_marked

    def holds(self, table):
        return table.alias in self.held

    def publish_visible(self, prefix, position, tables):
        self.published.append((prefix, position, [t.alias for t in tables]))


def test_each_store_gets_the_position_through_its_sink_unless_it_lost_its_data(tmp_path):
    config = SimpleNamespace(topic_prefix="p", flat_tables=[SimpleNamespace(index_name="orders"),
                                                             SimpleNamespace(index_name="lines")],
                             documents=[SimpleNamespace(index_name="order_docs")],
                             spark=SimpleNamespace(checkpoint_dir=tmp_path))
    p = VisibilityPublisher(config, interval_s=60)
    search, cache = Sink(holds=("orders", "order_docs")), Sink(marked=False)
    p._sinks = {"search": search, "cache": cache}
    p._publish(100)
    # Only the indexes that exist are refreshed (an alias not made yet would fail the refresh).
    assert search.published == [("p", 100, ["order_docs", "orders"])]
    assert cache.published == [] and p.published == 100   # its marker gone: no position there
    cache.is_marked = True
    p._publish(150)
    assert cache.published == [("p", 150, [])] and p.published == 150
