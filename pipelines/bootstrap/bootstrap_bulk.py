"""The bootstrap's bulk: the initial snapshot applied as Debezium writes it, with the rebuild's
machinery (each Kafka partition read by its own task, folded, bulk-written), instead of through
the streaming query's micro-batches.

Rounds follow the topics: each reads every partition from where the last one reached to the end
offsets seen at its start, and applies the partition's leading snapshot reads (op=r). The first
record that is not one (Debezium streams the changes made meanwhile after the snapshot; a
tombstone) stops that partition; an undecodable record is dead-lettered, as the stream would, and
the reads go on (a stop would leave the rest of the snapshot to a stream `--once` never runs).
The streaming query starts where a partition stopped, so deletes and truncates take their usual
path and nothing is applied twice but reads, whose versions make a second write harmless. The
bulk is done after a round that began once Connect had committed the snapshot's offsets: Connect
commits only what Kafka acknowledged, so that round's end offsets hold every snapshot record (the
argument of pipelines/bootstrap/steps.Watch.check_idle). A second, independent check: that round
must also have found Debezium's final snapshot record (`snapshot: last`), unless a partition's
reads ended early (a change follows them: the streaming query reads on from there) or the
snapshot had no rows; the offsets' check once ended a 1M-row snapshot after 283 rows, on an
offset Debezium commits as the snapshot starts (connectors/connect_client.snapshot_committed).

While Debezium is still writing, a round's tasks follow their partitions past the round's ends
(`follow`): once their ranges are read they read what arrived since, until nothing more comes
for FOLLOW_IDLE_S or FOLLOW_S have passed since the task began. So the bulk keeps up with the
snapshot as it is written, and what is left when the snapshot ends is small (no round's worth of
backlog). A task follows whole partitions (three on two cores: one task follows two), so when the
bulk is behind Debezium following would leave one core idle while the other works through two
partitions' backlog: a task whose ranges took the whole FOLLOW_S does not follow, and one that
follows stops at FOLLOW_S, wherever it is, so the next round splits what is left evenly again.
The last round, begun after Connect committed the snapshot, does not follow: it reads exactly to
the ends read after the commit.

Memory stays bounded by a task's chunk (a snapshot read is the only record of its row, so folding
chunk by chunk loses nothing), not by the table's size.

A small snapshot (at most IN_PROCESS_ROWS rows counted at the start) is applied by the command's
own process, the same tasks one after the other: a Spark job's fixed cost (a first job, the
workers' start) is seconds, and the snapshot need not wait for Spark's session at all
(benchmarks/first_minute.py). One Python thread decodes for it: on two cores, 200,000 rows into
both stores were synced in 22 s in process against 28 s through Spark, while 1,000,000 took
longer in process (cache 57 against 49 s, search 66 against 58 s; benchmarks/README.md). A
larger one, with Spark's master local, is applied by as many worker processes as it has cores
(local_tasks: no session needed, no job per round); with a cluster's master, by a Spark job per
round.
"""
from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Iterator

import orjson
import pyarrow as pa

from connectors.envelope import fence_key
from connectors.kafka.broker_errors import TopicLost
from connectors.kafka.clients import matching_topics, topic_ids
from connectors.kafka.offsets import end_offsets
from connectors.kafka.ranges import KafkaRange, log_end, pack_ranges, read_messages
from pipelines.apply import letter_kinds
from pipelines.apply.batch import apply_changes, prepare
from pipelines.apply.letter_kinds import FirstLetters
from pipelines.apply.snapshot_reads import SnapshotReads
from pipelines.apply.stats import BatchStats
from pipelines.bootstrap.local_tasks import LocalTasks, WorkersLost, local_cores
from pipelines.config import Config
from pipelines.spark.worker_context import worker_config, worker_resources
from pipelines.spark.schemas import ddl
from pipelines.state.bootstrap_state import SnapshotBulk, read_bulk, write_bulk
from pipelines.state.fences import FenceStore
from pipelines.state.topic_ids import TopicIds
from pipelines.stopping import Interrupted, StopRequest

log = logging.getLogger("cdckit.bootstrap")

GROUP_SCHEMA = pa.schema([("pieces", pa.string()), ("follow_s", pa.float64())])   # one row per task
RESULT_SCHEMA = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("start", pa.int64()), ("reached", pa.int64()),
    ("stopped", pa.bool_()),
    ("reads", pa.int64()), ("fence", pa.int64()), ("search_applied", pa.int64()), ("cache_applied", pa.int64()),
    ("dead_letters", pa.int64()), ("letter_kinds", pa.string()), ("snapshot_last", pa.bool_()),
])
IDLE_WAIT_S = 0.3       # between rounds that found nothing new
IN_PROCESS_ROWS = 200_000   # a snapshot this small is applied without Spark (see the module's docstring)
PAUSED_REFRESH_ROWS = 50_000  # a larger one is loaded with its indexes' refreshes paused (steps.pause_refreshes)
FOLLOW_S = 10.0         # a following task's longest stretch from its start: the round's progress and resume point
LAST_ROUND_TASKS_PER_WORKER = 4   # local workers: the last round's work in this many tasks per worker
FOLLOW_IDLE_S = 0.5     # nothing new this long: the snapshot is (nearly) written, the round ends
LAST_WAIT_S = 120.0     # offsets committed, nothing new this long, no final snapshot record: ended unconfirmed


def run(session: Callable[[], Any], config: Config, on_round: Callable[[SnapshotBulk], None],
        committed: Callable[[], bool], stop: StopRequest | None = None, check: Callable[[], None] = lambda: None,
        rows: int | None = None) -> SnapshotBulk:
    """Rounds until the snapshot is applied (see the module's docstring); returns the final state,
    also recorded in the checkpoint. `session()`: the Spark session (asked for only by a round that
    runs as a Spark job: a cluster's master; a local one's tasks run in local_tasks); `rows`: the
    snapshot's rows counted at its start (None: unknown, not applied in this process);
    `committed()`: Connect has committed the snapshot's offsets; `check()` raises when
    the connector failed; a stop request ends it between rounds (Interrupted: a rerun resumes it)."""
    ckpt = config.spark.checkpoint_dir
    bulk = read_bulk(ckpt) or SnapshotBulk({}, [], {}, {})
    started = time.monotonic() - bulk.seconds
    config_json = orjson.dumps(config.model_dump(mode="json"))
    in_process = applied_in_process(rows)
    cores = None if in_process else local_cores(config.spark.master)
    # Started now: the workers' imports overlap Debezium's start, not the first round.
    local = LocalTasks(cores, run_group).warm() if cores is not None else None
    try:
        return _rounds(session, config, config_json, bulk, started, on_round, committed, stop, check, rows,
                       in_process, local)
    finally:
        if local is not None:
            local.close()


def _rounds(session, config: Config, config_json: bytes, bulk: SnapshotBulk, started: float, on_round, committed,
            stop, check, rows, in_process: bool, local: LocalTasks | None) -> SnapshotBulk:
    ckpt = config.spark.checkpoint_dir
    client = config.kafka.client_config()
    fn = bulk_fn(config_json)
    known_ids = TopicIds(ckpt)
    first_letters = FirstLetters()
    seen_committed = False
    believed_since: float | None = None
    told_waiting = False
    while not bulk.done:
        if stop is not None and stop.is_set():
            raise Interrupted(f"in the snapshot's bulk apply after {bulk.rounds} round(s)")
        check()
        # Before the ends: then they hold every snapshot record. Believed from the second round
        # in a row that says so: the first still follows the topics (a bulk once ended a snapshot
        # at a fifth of its rows in a first round begun as Debezium started writing; not seen again).
        now_committed = committed()
        last, seen_committed = now_committed and seen_committed, now_committed
        believed_since = (believed_since or time.monotonic()) if last else None
        topics = matching_topics(client, config.topic_pattern)
        ends = end_offsets(client, topics) if topics else {}
        ids = topic_ids(client, config.topic_pattern)
        recreated = known_ids.recreated(ids)
        if recreated:  # the offsets reached belong to the old topics
            raise TopicLost(f"change topics recreated during the snapshot's bulk: {', '.join(recreated[:5])}; "
                            "run `cdckit bootstrap` again (it re-snapshots)")
        known_ids.learn(ids)
        ranges = pending_ranges(bulk, ends)
        # Following is for while Debezium writes: the last round reads exactly to its ends.
        follow = {} if last else following(bulk, ends)
        if ranges or follow:
            follow_s = 0.0 if last else FOLLOW_S
            if in_process:   # one task of every piece, here
                results = run_group(config_json, task_groups(ranges, follow, 1)[0], follow_s)
            elif local is not None:   # Spark's master is local: the same tasks in this machine's processes
                # Tasks that follow hold a worker for seconds: one each. Without (the last round), smaller
                # tasks than workers: a worker done early takes the next, none idles while one finishes.
                tasks = local.processes if follow else local.processes * LAST_ROUND_TASKS_PER_WORKER
                try:
                    results = local.run(config_json, task_groups(split_ranges(ranges, tasks), follow, tasks),
                                        follow_s)
                except WorkersLost:
                    if stop is not None and stop.is_set():   # a stop sent to every process (a cgroup's)
                        raise Interrupted(f"in the snapshot's bulk apply after {bulk.rounds} round(s)") from None
                    raise
            else:
                spark = session()
                cores = spark.sparkContext.defaultParallelism
                groups = task_groups(split_ranges(ranges, cores), follow, cores)
                rows_in = [(orjson.dumps(g).decode(), follow_s) for g in groups]
                frame = spark.createDataFrame(spark.sparkContext.parallelize(rows_in, len(rows_in)),
                                              ddl(GROUP_SCHEMA))
                results = frame.mapInArrow(fn, ddl(RESULT_SCHEMA)).toArrow().to_pylist()
            settle(bulk, config, results)
            for line in first_letters.lines([s for r in results for s in orjson.loads(r["letter_kinds"] or "[]")],
                                            lambda t: getattr(config.table_for_topic(t), "name", None)):
                log.warning(line)
            ranges = ranges or [r for r in results if r["reached"] > r["start"]]
        if last and ranges:   # the wait for the final record counts from the last round that read anything
            believed_since = time.monotonic()
        for t, parts in ends.items():   # partitions met empty still get a place to start from
            for p in parts:
                bulk.reached.setdefault(t, {}).setdefault(str(p), 0)
        bulk.rounds += 1
        bulk.done = last and final_record_read(bulk, rows, time.monotonic() - (believed_since or 0.0))
        if last and not bulk.done and not told_waiting:
            told_waiting = True
            log.info("the snapshot's offsets are committed; its final record (snapshot=last) not read yet: reading on")
        bulk.seconds = round(time.monotonic() - started, 1)
        if bulk.done:  # fences first: the streaming query's first batch starts from them
            FenceStore(ckpt).save(-1, bulk.fences)
        write_bulk(ckpt, bulk)
        log.debug("snapshot bulk round %d: %d range(s), %s reads so far, done=%s", bulk.rounds, len(ranges),
                  sum(bulk.reads.values()), bulk.done)
        on_round(bulk)
        if not ranges and not bulk.done:
            time.sleep(IDLE_WAIT_S)
    return bulk


def final_record_read(bulk: SnapshotBulk, rows: int | None, quiet_s: float) -> bool:
    """Whether the bulk may end, Connect's offsets saying the snapshot is over (see the module's
    docstring): Debezium's final snapshot record was read, or a partition's reads ended early (the
    stream takes the rest), or there were no rows. Without it, once nothing new came for LAST_WAIT_S
    (`quiet_s`), it ends unconfirmed (`bulk.unconfirmed`: the bootstrap says so, not "consistent")."""
    if bulk.saw_last or bulk.stopped or rows == 0:
        return True
    if quiet_s < LAST_WAIT_S:
        return False
    bulk.unconfirmed = (f"Debezium's final snapshot record (snapshot=last) was not read, nothing new for "
                        f"{quiet_s:.0f} s after Connect committed the snapshot's offsets")
    return True


def refreshes_paused(rows: int | None) -> bool:
    """A snapshot of more than PAUSED_REFRESH_ROWS counted rows (or uncounted) is loaded unsearched."""
    return rows is None or rows > PAUSED_REFRESH_ROWS


def applied_in_process(rows: int | None) -> bool:
    """A snapshot of at most IN_PROCESS_ROWS counted rows is applied by the command's own process."""
    return rows is not None and rows <= IN_PROCESS_ROWS


def pending_ranges(bulk: SnapshotBulk, ends: dict[str, dict[str, int]]) -> list[tuple[str, int, int, int]]:
    """(topic, partition, start, end) of every partition not stopped with records past its reach."""
    out = []
    for t, parts in ends.items():
        for p, end in parts.items():
            start = int(bulk.reached.get(t, {}).get(str(p), 0))
            if fence_key(t, int(p)) not in bulk.stopped and int(end) > start:
                out.append((t, int(p), start, int(end)))
    return sorted(out, key=lambda r: r[2] - r[3])   # largest first: the longest task starts first


def following(bulk: SnapshotBulk, ends: dict[str, dict[str, int]]) -> dict[tuple[str, int], int]:
    """The partitions a round's tasks follow past its ends (every one not stopped), with their reach."""
    return {(t, int(p)): int(bulk.reached.get(t, {}).get(str(p), 0))
            for t, parts in ends.items() for p in parts if fence_key(t, int(p)) not in bulk.stopped}


def task_groups(pieces: list[tuple[str, int, int, int]], follow: dict[tuple[str, int], int], tasks: int
                ) -> list[list[list]]:
    """The round's pieces packed into at most `tasks` tasks (a second wave would wait for tasks
    that follow for seconds), each piece [topic, partition, start, end, follow]: the piece that
    reaches a followed partition's end follows it; a followed partition with nothing pending gets
    an empty piece at its reach."""
    ends: dict[tuple[str, int], int] = {}
    for t, p, _, e in pieces:
        ends[(t, p)] = max(e, ends.get((t, p), e))
    idle = [KafkaRange(t, p, at, at) for (t, p), at in follow.items() if (t, p) not in ends]
    packed = pack_ranges([KafkaRange(*piece) for piece in pieces] + idle, tasks)
    return [[[r.topic, r.partition, r.start, r.end,
              (r.topic, r.partition) in follow and r.end == ends.get((r.topic, r.partition), r.end)]
             for r in group] for group in packed]


MIN_PIECE = 10_000      # records: below this a task's start costs more than the split saves


def split_ranges(ranges: list[tuple[str, int, int, int]], tasks: int) -> list[tuple[str, int, int, int]]:
    """The ranges cut into pieces of about an equal share of `tasks`, so every core works for the
    whole round (three partitions on two cores would otherwise take two waves). Safe for reads:
    a piece after a partition's first change may apply reads the streaming query then applies
    again at the same version (settle hands over at the lowest stop)."""
    total = sum(e - s for _, _, s, e in ranges)
    share = max(MIN_PIECE, -(-total // max(1, tasks)))
    out = []
    for t, p, s, e in ranges:
        while e - s > share + share // 2:
            out.append((t, p, s, s + share))
            s += share
        out.append((t, p, s, e))
    return sorted(out, key=lambda r: r[2] - r[3])


def settle(bulk: SnapshotBulk, config: Config, rows: list[dict[str, Any]]) -> None:
    """A round's task results into the bulk's state: a partition cut into pieces reaches its
    lowest stop if a piece stopped, else its end."""
    parts: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for row in rows:
        parts.setdefault((row["topic"], row["partition"]), []).append(row)
    for (topic, partition), pieces in parts.items():
        stops = [int(r["reached"]) for r in pieces if r["stopped"]]
        reached = min(stops) if stops else max(int(r["reached"]) for r in pieces)
        key = fence_key(topic, partition)
        bulk.reached.setdefault(topic, {})[str(partition)] = reached
        if stops and key not in bulk.stopped:
            bulk.stopped.append(key)
        # Pieces past the stop read what the streaming query reads again: their fences are its to find.
        fence = max((int(r["fence"]) for r in pieces if not stops or int(r["start"]) < reached), default=0)
        if fence:
            bulk.fences[key] = max(bulk.fences.get(key, 0), fence)
        bulk.saw_last = bulk.saw_last or any(r.get("snapshot_last") for r in pieces)
        table = config.table_for_topic(topic)
        reads = sum(int(r["reads"]) for r in pieces)
        if table is not None and reads:
            bulk.reads[table.name] = bulk.reads.get(table.name, 0) + reads
        letters = sum(int(r.get("dead_letters") or 0) for r in pieces)
        if letters:   # by table, for the bootstrap's verdict (a topic of no table by its name)
            name = table.name if table is not None else topic
            bulk.dead_letters[name] = bulk.dead_letters.get(name, 0) + letters


def bulk_fn(config_json: bytes) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function over a DataFrame of task groups, one per Spark partition."""

    def run_groups(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for rb in batches:
            for r in rb.to_pylist():
                yield apply_group(config_json, orjson.loads(r["pieces"]), r["follow_s"])

    return run_groups


class PieceApply:
    """One piece of a partition: its leading snapshot reads into the live stores, a chunk at a
    time, from `start` on; `reached` is where it stopped (the first other record) or read to."""

    def __init__(self, config: Config, config_json: bytes, topic: str, partition: int, start: int, end: int,
                 follow: bool):
        self.config, self.topic, self.partition, self.start, self.end, self.follow = (
            config, topic, partition, start, end, follow)
        self.reached = start
        self.stores, self.dlq = worker_resources(config_json)
        self.stats, self.letters, self.kinds = BatchStats(), [], []
        self.reads = SnapshotReads({t.name: t.key for t in config.tables},
                                   {config.topic_for(t): t.name for t in config.tables}, self._write,
                                   config.postgres.truncate_table)
        self._writing: Future | None = None

    def _write(self, fold) -> None:
        """A chunk's write runs while the next chunk is read and folded (the stores' answers are
        a third of a task's time); one in flight, so the memory is two chunks and writes keep
        their order."""
        self._written()
        self._writing = _writer().submit(self._apply, fold)

    def _written(self) -> None:
        """The chunk in flight written (its error raised here)."""
        if self._writing is not None:
            writing, self._writing = self._writing, None
            writing.result()

    def _apply(self, fold) -> None:
        survivors, dead = fold.survivors(), list(fold.dead)
        # Columns Debezium could not render (multidimensional arrays) are read; the row filters judged.
        _, filtered = prepare(self.stores, survivors, dead=dead)
        self.stats.filtered_out += filtered
        apply_changes(self.stores, [], survivors, self.stats, dead, [])
        self.letters.append(self.dlq.write(dead) if dead else 0)
        if dead:
            self.kinds = letter_kinds.merge(self.kinds, letter_kinds.sample(dead))

    @property
    def stopped(self) -> bool:
        return self.reads.stopped_at is not None

    def read_to(self, end: int, deadline: float | None = None) -> None:
        """Reads up to `end`; with a `deadline` (time.monotonic) also stops, after a fetch, once it passed."""
        if self.stopped or end <= self.reached:
            return
        reader = read_messages(self.config.kafka.client_config(), KafkaRange(self.topic, self.partition, self.reached, end))
        reached = end
        try:
            for msgs in reader:
                if not self.reads.add(self.topic, self.partition, msgs):
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    reached = msgs[-1].offset() + 1
                    break
        finally:
            reader.close()
        self.reached = reached if self.reads.stopped_at is None else self.reads.stopped_at

    def result(self) -> dict[str, Any]:
        self.reads.finish()
        self._written()
        return {"topic": self.topic, "partition": self.partition, "start": self.start, "reached": self.reached,
                "stopped": self.stopped, "reads": self.reads.reads,
                "fence": self.reads.fences.get(fence_key(self.topic, self.partition), 0),
                "search_applied": self.stats.search_applied, "cache_applied": self.stats.cache_applied,
                "dead_letters": sum(self.letters),
                "letter_kinds": orjson.dumps(self.kinds).decode() if self.kinds else None,
                "snapshot_last": self.reads.saw_last}


_WRITER: ThreadPoolExecutor | None = None


def _writer() -> ThreadPoolExecutor:
    """One thread per process writes the pieces' chunks (a task's pieces run one after another)."""
    global _WRITER
    if _WRITER is None:
        _WRITER = ThreadPoolExecutor(1, thread_name_prefix="snapshot-writer")
    return _WRITER


def apply_group(config_json: bytes, pieces: list[list], follow_s: float = 0.0) -> pa.RecordBatch:
    """A task's pieces (see task_groups), then, for up to `follow_s` seconds, what arrives in its
    followed partitions after them; a result row per piece."""
    return pa.RecordBatch.from_pylist(run_group(config_json, pieces, follow_s), schema=RESULT_SCHEMA)


def run_group(config_json: bytes, pieces: list[list], follow_s: float) -> list[dict[str, Any]]:
    """apply_group's result rows, as they are: what a local worker or the command's own process
    sends back (local_tasks). No Arrow there: building a RecordBatch from rows imports pandas, a
    second of a worker's CPU beside Debezium's snapshot, for rows read back at once."""
    began = time.monotonic()
    config = worker_config(config_json)
    applies = [PieceApply(config, config_json, t, int(p), int(s), int(e), bool(f)) for t, p, s, e, f in pieces]
    for a in applies:
        a.read_to(a.end)
    if follow_s > 0:
        follow(config.kafka.client_config(), [a for a in applies if a.follow], began + follow_s)
    return [a.result() for a in applies]


def follow(conf: dict[str, Any], applies: list[PieceApply], deadline: float) -> None:
    """Read what arrives in the pieces' partitions until nothing has for FOLLOW_IDLE_S, every one
    stopped, or the clock (time.monotonic) passed `deadline`, wherever the reading is."""
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        going = [a for a in applies if not a.stopped]
        if not going:
            return
        moved = False
        for a in going:
            high = log_end(conf, a.topic, a.partition)
            if high is not None and high > a.reached:
                a.read_to(high, deadline)
                moved = True
            if time.monotonic() >= deadline:
                return
        if moved:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= FOLLOW_IDLE_S:
            return
        else:
            time.sleep(0.05)
