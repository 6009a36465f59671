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


def test_each_store_gets_the_position_through_its_sink_unless_it_lost_its_data(monkeypatch, tmp_path):
    import pipelines.apply.stores as stores

    monkeypatch.setattr(stores, "refresh_intervals", lambda c: dict.fromkeys(
        [t.index_name for t in c.flat_tables] + [d.index_name for d in c.documents]))
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


class Refreshed(Sink):
    def __init__(self, holds):
        super().__init__(holds=holds)
        self.refreshed = []

    def make_readable(self, tables):
        self.refreshed.append(sorted(t.alias for t in tables))


def refreshing_publisher(monkeypatch, tmp_path, search):
    import pipelines.apply.stores as stores

    config = SimpleNamespace(topic_prefix="p", flat_tables=[SimpleNamespace(index_name="orders"),
                                                             SimpleNamespace(index_name="archive"),
                                                             SimpleNamespace(index_name="lines")],
                             documents=[SimpleNamespace(index_name="order_docs")],
                             spark=SimpleNamespace(checkpoint_dir=tmp_path))
    monkeypatch.setattr(stores, "refresh_intervals", lambda c: {
        "orders": None, "archive": "30s", "lines": "500ms", "order_docs": "1s"})
    p = VisibilityPublisher(config, interval_s=60)
    p._snapshot_done = True
    p._snapshot_committed = lambda: True
    p._advance = lambda: p.published           # the position does not move
    p._sinks = {"search": search, "cache": Sink()}
    return p


def test_a_batch_s_search_writes_are_made_searchable_at_the_next_round(monkeypatch, tmp_path):
    """Without waiting for the engine's next refresh or the position's next move: only the indexes
    refreshed every second or faster, and only after a batch said it wrote."""
    search = Refreshed(holds=("orders", "archive", "order_docs"))   # `lines` has no index yet
    p = refreshing_publisher(monkeypatch, tmp_path, search)
    p.step()
    assert search.refreshed == []              # nothing written
    p.written()
    p.step()
    p.step()
    assert search.refreshed == [["order_docs", "orders"]]
    search.held.add("lines")                   # an index made since: in the next listing
    p._aliases_at = float("-inf")
    p.written()
    p.step()
    assert search.refreshed[-1] == ["lines", "order_docs", "orders"]


def test_no_refresh_of_its_own_while_the_snapshot_streams_in_or_when_a_publish_refreshed(monkeypatch, tmp_path):
    search = Refreshed(holds=("orders",))
    p = refreshing_publisher(monkeypatch, tmp_path, search)
    p._snapshot_done = False                   # the initial snapshot is a load: no refresh per batch
    p.written()
    p.step()
    p._snapshot_done = True

    def publish():
        p.published += 1
        return p.published
    p._advance = publish                       # the position moved: its publish refreshed them
    p.written()
    p.step()
    assert search.refreshed == []


def test_a_failed_refresh_is_said_once_and_the_position_still_moves(monkeypatch, tmp_path, caplog):
    class Away(Refreshed):
        def make_readable(self, tables):
            raise ConnectionError("engine away")

    p = refreshing_publisher(monkeypatch, tmp_path, Away(holds=("orders",)))
    for _ in range(3):
        p.written()
        p.step()
    assert [r.message for r in caplog.records].count(
        "search indexes not refreshed after a batch (ConnectionError: engine away): the writes show at the "
        "engine's next scheduled refresh") == 1
    moved = []
    p._advance = lambda: (moved.append(1), p.published)[1]
    p.written()
    assert p.step() == 0 and moved == [1]
