"""The bootstrap bulk's driver logic: ranges cut for the cores, pieces settled into the hand-over."""
import pytest
from hypothesis import given, strategies as st

from pipelines.config import parse_config
from pipelines.bootstrap.bootstrap_bulk import pending_ranges, settle, split_ranges
from pipelines.state.bootstrap_state import SnapshotBulk
from tests.support.configs import BASE
from tests.support.records import KafkaMessage

CLUSTER = "spark://127.0.0.1:7077"


@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 100_000), st.integers(0, 100_000)), max_size=6),
       st.integers(1, 8))
def test_pieces_cover_each_range_contiguously(spans, tasks):
    ranges = [("t", i, min(a, b), max(a, b) + 1) for i, (_, a, b) in enumerate(spans)]
    pieces = split_ranges(ranges, tasks)
    for t, p, s, e in ranges:
        mine = sorted((ps, pe) for pt, pp, ps, pe in pieces if (pt, pp) == (t, p))
        assert mine[0][0] == s and mine[-1][1] == e
        assert all(a[1] == b[0] for a, b in zip(mine, mine[1:]))


def row(start, reached, stopped, reads, fence=0, partition=0, topic="cdc.public.items"):
    return {"topic": topic, "partition": partition, "start": start, "reached": reached, "stopped": stopped,
            "reads": reads, "fence": fence}


def test_a_partition_hands_over_at_its_lowest_stop_and_keeps_the_fences_before_it():
    config = parse_config(BASE)
    bulk = SnapshotBulk({}, [], {}, {})
    topic = config.topic_for(config.tables[0])
    settle(bulk, config, [row(0, 100, False, 100, 50, topic=topic), row(100, 130, True, 30, 50, topic=topic),
                          row(200, 300, False, 100, 90, topic=topic), row(0, 40, False, 40, 7, 1, topic)])
    assert bulk.reached[topic] == {"0": 130, "1": 40}
    assert bulk.stopped == [f"{topic}:0"] and bulk.fences == {f"{topic}:0": 50, f"{topic}:1": 7}
    assert bulk.reads == {config.tables[0].name: 270}
    # A stopped partition is not read again; the others from where they reached.
    assert pending_ranges(bulk, {topic: {"0": 500, "1": 90}}) == [(topic, 1, 40, 90)]


def test_the_snapshots_dead_letters_add_up_per_table_across_rounds():
    config = parse_config(BASE)
    bulk = SnapshotBulk({}, [], {}, {})
    topic = config.topic_for(config.tables[0])
    settle(bulk, config, [{**row(0, 100, False, 100, topic=topic), "dead_letters": 3},
                          {**row(100, 200, False, 100, partition=1, topic=topic), "dead_letters": 2},
                          {**row(0, 10, False, 10, topic="cdc.public.cdckit_heartbeat"), "dead_letters": 1}])
    settle(bulk, config, [{**row(100, 150, False, 50, topic=topic), "dead_letters": 4}])
    assert bulk.dead_letters == {config.tables[0].name: 9, "cdc.public.cdckit_heartbeat": 1}


def test_the_stream_starts_at_the_hand_over_naming_exactly_the_partitions_there_are(monkeypatch):
    import json

    import connectors.kafka.clients as admin
    import connectors.kafka.offsets as offsets
    from pipelines.spark.change_topics import starting_option

    class Marks:
        def __init__(self, conf, topics):
            self.topics = topics

        def partitions(self):
            return [(t, p) for t in self.topics for p in (0, 1)]

        def close(self):
            pass

    monkeypatch.setattr(admin, "matching_topics", lambda conf, pattern: ["a", "late"])
    monkeypatch.setattr(offsets, "Watermarks", Marks)
    config = parse_config(BASE)
    got = json.loads(starting_option(config, config.topic_pattern, {"a": {"0": 7, "1": 3}, "deleted": {"0": 5}}))
    # Spark's own source refuses JSON that leaves a subscribed partition out or names one it lacks.
    assert got == {"a": {"0": 7, "1": 3}, "late": {"0": -2, "1": -2}}
    assert starting_option(config, config.topic_pattern, None) == "earliest"


def test_a_resnapshot_after_lost_topics_is_not_applied_in_bulk(tmp_path):
    from pipelines.bootstrap import steps as bootstrap
    from pipelines.state.bootstrap_state import mark_resnapshot

    config = parse_config({**BASE, "spark": {"checkpoint_dir": str(tmp_path)}})
    assert bootstrap.bulk_applicable(config, None)
    mark_resnapshot(tmp_path, {"at": 0})
    assert not bootstrap.bulk_applicable(config, None)


def test_bootstrap_once_asks_for_spark_only_for_a_snapshot_it_cannot_apply_itself(tmp_path):
    from pipelines.bootstrap import steps as bootstrap
    from pipelines.bootstrap.bootstrap_bulk import IN_PROCESS_ROWS
    from pipelines.state.bootstrap_state import mark_resnapshot

    config = parse_config({**BASE, "spark": {"checkpoint_dir": str(tmp_path), "master": CLUSTER}})
    assert bootstrap.applied_without_spark(config, {"public.a": IN_PROCESS_ROWS // 2, "public.b": IN_PROCESS_ROWS // 2})
    assert not bootstrap.applied_without_spark(config, {"public.a": IN_PROCESS_ROWS, "public.b": 1})
    local = parse_config({**BASE, "spark": {"checkpoint_dir": str(tmp_path), "master": "local[2]"}})
    assert bootstrap.applied_without_spark(local, {"public.a": IN_PROCESS_ROWS * 5})   # by local processes
    mark_resnapshot(tmp_path, {"at": 0})   # through the streaming query: Spark
    assert not bootstrap.applied_without_spark(config, {"public.a": 1})
    assert not bootstrap.applied_without_spark(local, {"public.a": 1})


@given(st.lists(st.tuples(st.integers(0, 50_000), st.integers(0, 50_000)), min_size=1, max_size=5),
       st.sets(st.integers(0, 4)), st.integers(1, 4))
def test_tasks_follow_each_partition_once_from_the_piece_at_its_end(spans, stopped, tasks):
    from pipelines.bootstrap.bootstrap_bulk import following, task_groups

    topic = "cdc.public.items"
    bulk = SnapshotBulk({topic: {str(p): s for p, (s, _) in enumerate(spans)}},
                        [f"{topic}:{p}" for p in stopped], {}, {})
    ends = {topic: {str(p): max(s, e) for p, (s, e) in enumerate(spans)}}
    follow = following(bulk, ends)
    groups = task_groups(split_ranges(pending_ranges(bulk, ends), tasks), follow, tasks)
    assert 1 <= len(groups) <= tasks or not follow and not pending_ranges(bulk, ends)
    pieces = [piece for g in groups for piece in g]
    for p, (s, e) in enumerate(spans):
        mine = [piece for piece in pieces if piece[1] == p]
        followed = [piece for piece in mine if piece[4]]
        if p in stopped:
            assert mine == []
            continue
        # exactly one piece follows, and it starts where nothing before it is left unread
        assert len(followed) == 1 and followed[0][3] == max(s, e)
        assert min(piece[2] for piece in mine) == s



@pytest.mark.parametrize("master", [CLUSTER, "local[3]"])
def test_a_small_snapshot_is_applied_in_this_process_and_a_large_one_by_spark_or_local_workers(
        monkeypatch, tmp_path, master):
    """Without Spark's session for a snapshot of at most IN_PROCESS_ROWS rows: every piece in one
    task here (a Spark job's fixed cost is more than such a snapshot's apply). A larger one: with a
    cluster's master, a Spark job; with a local master, as many local workers as its cores, the
    pieces split over them, and no session."""
    import copy

    import pyarrow as pa

    from pipelines.bootstrap import bootstrap_bulk as bb

    data = copy.deepcopy(BASE)
    data["spark"] = {**data.get("spark", {}), "checkpoint_dir": str(tmp_path / "ckpt"), "master": master}
    config = parse_config(data)
    topic = config.topic_for(config.tables[0])
    monkeypatch.setattr(bb, "matching_topics", lambda conf, pattern: [topic])
    monkeypatch.setattr(bb, "end_offsets", lambda conf, topics: {topic: {"0": 300, "1": 200}})
    monkeypatch.setattr(bb, "topic_ids", lambda conf, pattern: {topic: "id-1"})
    groups = []

    def apply_group(config_json, pieces, follow_s=0.0):
        groups.append(pieces)
        return pa.RecordBatch.from_pylist([{**row(s, e, False, e - s, partition=p, topic=t), "search_applied": 0,
                                            "cache_applied": 0, "dead_letters": 0, "letter_kinds": None,
                                            "snapshot_last": p == 1}
                                           for t, p, s, e, _ in pieces], schema=bb.RESULT_SCHEMA)

    monkeypatch.setattr(bb, "apply_group", apply_group)
    monkeypatch.setattr(bb, "run_group", lambda config_json, pieces, follow_s: apply_group(
        config_json, pieces, follow_s).to_pylist())

    def no_session():
        raise AssertionError("a small snapshot waited for Spark")

    bulk = bb.run(no_session, config, lambda b: None, lambda: True, rows=500)
    assert bulk.done and bulk.reads == {config.tables[0].name: 500}
    assert [sorted((p, s, e) for _, p, s, e, _ in g) for g in groups] == [[(0, 0, 300), (1, 0, 200)]]

    (tmp_path / "ckpt").rename(tmp_path / "first")   # a fresh bulk
    if master == CLUSTER:
        asked = []

        def session():
            asked.append(True)
            raise RuntimeError("the Spark job")

        with pytest.raises(RuntimeError, match="the Spark job"):
            bb.run(session, config, lambda b: None, lambda: True, rows=bb.IN_PROCESS_ROWS + 1)
        with pytest.raises(RuntimeError, match="the Spark job"):   # rows unknown: Spark's
            bb.run(session, config, lambda b: None, lambda: True)
        assert asked == [True, True]
        return

    class Local:   # the pool, without processes
        made, closed = [], []

        def __init__(self, processes, task):
            assert task is bb.run_group
            self.processes = processes
            Local.made.append(processes)

        def warm(self):
            return self

        def run(self, config_json, groups, follow_s):
            # a following task holds its worker: one each; the last round's may be more, smaller
            assert len(groups) <= self.processes * (1 if follow_s else bb.LAST_ROUND_TASKS_PER_WORKER)
            return [r for g in groups for r in apply_group(config_json, g, follow_s).to_pylist()]

        def close(self):
            Local.closed.append(True)

    monkeypatch.setattr(bb, "LocalTasks", Local)
    groups.clear()
    bulk = bb.run(no_session, config, lambda b: None, lambda: True, rows=bb.IN_PROCESS_ROWS + 1)
    assert bulk.done and bulk.reads == {config.tables[0].name: 500}
    assert Local.made == [3] and Local.closed == [True]
    first_round = [sorted((p, s, e) for _, p, s, e, _ in g) for g in groups[:3]]
    assert sorted(piece for g in first_round for piece in g) == [(0, 0, 300), (1, 0, 200)]


def test_a_pieces_chunks_are_written_in_order_one_in_flight_and_a_failed_write_is_raised():
    import threading
    import time

    import pytest

    from pipelines.bootstrap.bootstrap_bulk import PieceApply

    piece = object.__new__(PieceApply)   # only its writing: no stores needed
    piece._writing = None
    written, in_flight, most = [], [0], [0]
    lock = threading.Lock()

    def apply(fold):
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        time.sleep(0.02)
        if fold == "bad":
            raise RuntimeError("search refused the request")
        written.append(fold)
        with lock:
            in_flight[0] -= 1

    piece._apply = apply
    for fold in ("a", "b", "c"):
        piece._write(fold)
    piece._written()
    assert written == ["a", "b", "c"] and most[0] == 1
    piece._write("bad")
    with pytest.raises(RuntimeError, match="refused"):
        piece._written()


def _bulk_on(monkeypatch, tmp_path, ends: list[dict], results):
    """A bulk whose topic grows through `ends` (one per round, the last repeated); `results(start,
    end, partition)` answers a piece as its task would."""
    import copy

    import pyarrow as pa

    from pipelines.bootstrap import bootstrap_bulk as bb

    data = copy.deepcopy(BASE)
    data["spark"] = {**data.get("spark", {}), "checkpoint_dir": str(tmp_path / "ckpt")}
    config = parse_config(data)
    topic = config.topic_for(config.tables[0])
    rounds = iter(ends)
    last = [ends[-1]]
    monkeypatch.setattr(bb, "matching_topics", lambda conf, pattern: [topic])
    monkeypatch.setattr(bb, "end_offsets", lambda conf, topics: {topic: next(rounds, last[0])})
    monkeypatch.setattr(bb, "topic_ids", lambda conf, pattern: {topic: "id-1"})
    monkeypatch.setattr(bb, "IDLE_WAIT_S", 0)
    monkeypatch.setattr(bb, "apply_group", lambda config_json, pieces, follow_s=0.0: pa.RecordBatch.from_pylist(
        [{**row(s, e, False, e - s, partition=p, topic=t), "search_applied": 0, "cache_applied": 0,
          "dead_letters": 0, "letter_kinds": None, **results(s, e, p)} for t, p, s, e, _ in pieces],
        schema=bb.RESULT_SCHEMA))
    monkeypatch.setattr(bb, "run_group", lambda config_json, pieces, follow_s: bb.apply_group(
        config_json, pieces, follow_s).to_pylist())
    return bb, config


def test_committed_offsets_alone_do_not_end_the_bulk_before_the_final_snapshot_record(monkeypatch, tmp_path):
    """Connect's offsets said the snapshot was over from the first second (an offset committed as it
    began): the bulk reads on until a round has read Debezium's final record (snapshot=last)."""
    ends = [{"0": 10}, {"0": 20}, {"0": 30}, {"0": 40}]
    bb, config = _bulk_on(monkeypatch, tmp_path, ends, lambda s, e, p: {"snapshot_last": e == 40})
    bulk = bb.run(lambda: None, config, lambda b: None, lambda: True, rows=40)
    assert bulk.done and bulk.saw_last and bulk.reads == {config.tables[0].name: 40}
    assert bb.read_bulk(config.spark.checkpoint_dir).saw_last


def test_the_bulk_ends_without_the_final_record_where_a_partition_stopped_or_nothing_was_there(monkeypatch,
                                                                                                tmp_path):
    bb, config = _bulk_on(monkeypatch, tmp_path, [{"0": 10, "1": 5}],
                          lambda s, e, p: {"stopped": p == 1, "snapshot_last": False})
    bulk = bb.run(lambda: None, config, lambda b: None, lambda: True, rows=15)
    assert bulk.done and not bulk.saw_last and bulk.stopped
    bb, config = _bulk_on(monkeypatch, tmp_path / "empty", [{"0": 0}], lambda s, e, p: {"snapshot_last": False})
    assert bb.run(lambda: None, config, lambda b: None, lambda: True, rows=0).done


def test_a_final_record_never_read_ends_the_bulk_unconfirmed_once_nothing_new_comes(monkeypatch, tmp_path):
    """The wait counts from the last round that read anything: a snapshot still being written (its
    offsets committed too early) is read on, however long it takes."""
    growing = [{"0": 10 * n} for n in range(1, 8)]
    bb, config = _bulk_on(monkeypatch, tmp_path, growing, lambda s, e, p: {"snapshot_last": False})
    clock = [0.0]
    monkeypatch.setattr(bb.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(bb.time, "sleep", lambda s: None)
    rounds = []

    def on_round(b):
        rounds.append(b.reads.get(config.tables[0].name, 0))
        clock[0] += 50.0   # each round 50 s: 7 of them outlast LAST_WAIT_S while the topic grows

    bulk = bb.run(lambda: None, config, on_round, lambda: True, rows=70)
    assert bulk.done and not bulk.saw_last and "snapshot=last" in bulk.unconfirmed
    assert bulk.reads == {config.tables[0].name: 70}   # every record written before it ended
    assert rounds[:7] == [10, 20, 30, 40, 50, 60, 70] and len(rounds) >= 9


def test_a_bulk_resumed_from_a_version_without_the_check_does_not_wait_for_a_record_it_read():
    assert SnapshotBulk.from_json({"reached": {}, "rounds": 3}).saw_last
    assert not SnapshotBulk.from_json({"reached": {}, "rounds": 0}).saw_last
    assert not SnapshotBulk.from_json(SnapshotBulk({}, [], {}, {}, rounds=3).as_json()).saw_last


def _reading_piece(monkeypatch, fetches_per_s: float, start: int = 0):
    """A PieceApply over a fake partition that fetches 100 records at a time, one fetch every
    1/fetches_per_s seconds of a fake clock, whose log end grows with the clock."""
    from pipelines.bootstrap import bootstrap_bulk as bb

    clock = [0.0]
    monkeypatch.setattr(bb.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(bb.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))

    def read_messages(conf, r):
        class Reader:
            def __iter__(self):
                for at in range(r.start, r.end, 100):
                    clock[0] += 1 / fetches_per_s
                    yield [KafkaMessage(o, b"{}") for o in range(at, min(at + 100, r.end))]

            def close(self):
                pass
        return Reader()

    monkeypatch.setattr(bb, "read_messages", read_messages)
    monkeypatch.setattr(bb, "log_end", lambda conf, topic, partition: 1_000_000)

    class Reads:
        stopped_at, folded = None, []

        def add(self, topic, partition, msgs):
            self.folded.extend(m.offset() for m in msgs)
            return True

    piece = object.__new__(bb.PieceApply)
    piece.topic, piece.partition, piece.reached, piece.follow = "t", 0, start, True
    piece.config = type("C", (), {"kafka": type("K", (), {"client_config": lambda self: {}})()})()
    piece.reads = Reads()
    return bb, piece, clock


def test_a_following_task_stops_at_its_deadline_mid_read_and_reaches_just_past_what_it_read(monkeypatch):
    # A task following a partition far behind its log end (the bulk behind Debezium) stops at the
    # deadline instead of reading the whole backlog: the next round splits it over every core.
    bb, piece, clock = _reading_piece(monkeypatch, fetches_per_s=10)
    bb.follow({}, [piece], deadline=2.0)
    assert 2.0 <= clock[0] < 2.2
    assert piece.reached == piece.reads.folded[-1] + 1 == 2_000
    assert piece.reads.folded == list(range(2_000))   # contiguous from the start: nothing skipped


def test_a_task_whose_ranges_took_its_follow_time_does_not_follow(monkeypatch):
    bb, piece, clock = _reading_piece(monkeypatch, fetches_per_s=10)
    piece.read_to(5_000)                        # its range: 5 s
    bb.follow({}, [piece], deadline=3.0)        # began at 0, FOLLOW_S 3
    assert piece.reached == 5_000 and piece.reads.folded == list(range(5_000))
