"""`cdckit bootstrap`: from empty stores to stores consistent with the database, watched.

Publication and support tables are ensured, the connector applied (initial snapshot), and the sync
runs in this process until it has applied Debezium's final snapshot record; the watermark (source
offsets and the snapshot LSN) is then recorded in a durable state file. The marker can only be
consumed inside a batch that also records it (Spark commits the batch afterwards), so an
interruption at any point is finished by running the command again.
"""
from __future__ import annotations

import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from connectors.kafka.broker_errors import NoFetchResponse
from connectors.kafka.clients import matching_topics, topic_ids, topic_names
from connectors.kafka.offsets import end_offsets
from pipelines.config import Config
from derived.sinks.store_errors import StoreUnavailable
from pipelines.errors import ConnectorFailed
from pipelines.state import bootstrap_state
from pipelines.state.bootstrap_state import BootstrapState
from pipelines.state.checkpoint import CheckpointDir
from pipelines.state.query_offsets import batch_offsets, committed_offsets
from pipelines.state.topic_ids import TopicIds
from pipelines.documents.snapshot_sweep import documents_applied, documents_topic_ends  # noqa: F401 - the CLI's
from pipelines.ops.snapshot_add import prepare  # noqa: F401 - the CLI's

log = logging.getLogger("cdckit.bootstrap")


def state_path(config: Config) -> Path:
    return bootstrap_state.state_path(config.spark.checkpoint_dir)


def read_state(config: Config) -> BootstrapState | None:
    return bootstrap_state.read_state(config.spark.checkpoint_dir)


@dataclass
class Watch:
    """Follows the snapshot through the batches the job applies."""

    config: Config
    totals: dict[str, int]
    on_progress: Callable[[str, int], None] = lambda table, n: None
    done: BootstrapState | None = None
    reads: dict[str, int] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    sweep: bool = False   # a re-snapshot after lost topics: remove what the snapshot did not rewrite
    metrics: Any = None   # the job's PipelineMetrics: the progress as gauges, for `status --watch`
    letters: dict[str, int] = field(default_factory=dict)   # dead letters per table until the snapshot is in

    def __post_init__(self) -> None:
        if self.metrics is not None and self.done is None:
            for name, total in self.totals.items():
                self.metrics.snapshot(name, 0, total)

    def on_batch(self, batch_id: int, stats, rows: list[dict[str, Any]]) -> None:
        if self.done is not None:
            return   # later reads are a re-snapshot's (a schema change's): not this snapshot's progress
        for row in rows:
            if row.get("dead_letters"):
                table = self.config.table_for_topic(row["topic"])
                name = table.name if table is not None else row["topic"]
                self.letters[name] = self.letters.get(name, 0) + row["dead_letters"]
            if row["snapshot_reads"]:
                self.snapshot_lsn = max(self.snapshot_lsn or 0, row["fence"])
            table = self.config.table_for_topic(row["topic"])
            if table is not None and row["snapshot_reads"]:
                self.reads[table.name] = self.reads.get(table.name, 0) + row["snapshot_reads"]
                self.on_progress(table.name, self.reads[table.name])
                if self.metrics is not None:
                    self.metrics.snapshot(table.name, self.reads[table.name], self.totals.get(table.name, 0))
        if stats.snapshot_last_lsn and self.done is None:
            self.complete(batch_offsets(self.config.spark.checkpoint_dir, batch_id), stats.snapshot_last_lsn,
                          "final snapshot record")

    def bulk_round(self, reads: dict[str, int]) -> None:
        """The bulk's progress (pipelines/bootstrap/bootstrap_bulk.py): snapshot reads applied per table."""
        for name, n in reads.items():
            if n != self.reads.get(name):
                self.reads[name] = n
                self.on_progress(name, n)
                if self.metrics is not None:
                    self.metrics.snapshot(name, n, self.totals.get(name, 0))

    def complete(self, offsets: dict[str, Any], lsn: int | None, how: str, doubt: str | None = None) -> None:
        swept = sweep_below_snapshot(self.config, lsn) if self.sweep and lsn else None
        if swept is not None and self.config.documents:   # theirs once their query has the snapshot
            bootstrap_state.mark_documents_sweep(self.config.spark.checkpoint_dir, lsn,
                                                 documents_topic_ends(self.config))
        self.finish(offsets, lsn, how, swept, doubt)

    def finish(self, offsets: dict[str, Any], lsn: int | None, how: str, swept: dict[str, int] | None = None,
               doubt: str | None = None) -> None:
        """The snapshot recorded as applied; `doubt`: why that is not certain (said as an error, and
        in the state's `detected_by`)."""
        how = f"{how}, unconfirmed" if doubt else how
        self.done = BootstrapState(time.time(), round(time.monotonic() - self.started, 1), lsn, offsets, how,
                                   dict(self.totals), dict(self.reads), swept, dict(self.letters),
                                   dead_letter_end(self.config) if self.letters else None)
        bootstrap_state.write_state(self.config.spark.checkpoint_dir, self.done)
        if self.metrics is not None:  # complete: the reads fall short where rows were deleted meanwhile
            for name, total in self.totals.items():
                self.metrics.snapshot(name, max(total, self.reads.get(name, 0)), total)
        if self.letters:
            log.error("snapshot applied but NOT consistent (LSN %s, %.1f s, by the %s): %s", lsn, self.done.seconds,
                      how, letters_message(self.letters))
            return
        if doubt:
            log.error("snapshot applied but NOT confirmed complete (LSN %s, %.1f s, by the %s): %s; run `cdckit "
                      "verify` once the job has caught up", lsn, self.done.seconds, how, doubt)
            return
        log.info("snapshot applied: the stores are consistent with it (LSN %s, %.1f s, by the %s); streaming "
                 "changes from here; watermark in %s", lsn, self.done.seconds, how, state_path(self.config))

    last_check: float = 0.0
    snapshot_lsn: int | None = None            # the snapshot reads' position (their partitions' fence)
    snapshot_end: dict[str, dict[str, int]] | None = None

    last_connector_check: float = 0.0

    def check_connector(self) -> None:
        """A failed connector task never finishes the snapshot: say so (with its trace's first
        line) instead of waiting forever."""
        if time.monotonic() - self.last_connector_check < 10:
            return
        self.last_connector_check = time.monotonic()
        from connectors.connect_client import ConnectError
        from pipelines.ops.connector_admin import status

        try:
            st = status(self.config)
        except ConnectError:
            return  # Connect busy or restarting: ask again at the next check
        failed = [t for t in (st.tasks if st else []) if t.state == "FAILED"]
        if st is not None and (failed or st.state == "FAILED"):
            trace = (failed[0].trace if failed else "") or ""
            lines = [line.strip() for line in trace.splitlines() if line.strip()]
            causes = [line[len("Caused by:"):].strip() for line in lines if line.startswith("Caused by:")]
            first = (lines[0] if lines else "no trace") + (f" (root cause: {causes[-1]})" if causes else "")
            which = f"connector {st.name}" + (f" task {failed[0].id}" if failed else "")
            raise ConnectorFailed(f"{which} FAILED during the snapshot: {first[:500]}; fix the cause, then "
                                  f"`cdckit connector restart` and `cdckit bootstrap` again")

    def check_idle(self) -> bool:
        """The other way to be done: Debezium's final snapshot record can be gone by the time the
        pipeline reads it (a compacted topic keeps only the newest record of its key: the heartbeat
        row is updated every few seconds), and with empty tables there is none at all. Connect
        commits a source offset only once its records are in Kafka, so a committed offset without
        Debezium's snapshot flag means every snapshot record is in the topics: the snapshot is
        applied once the pipeline has read up to the topics' ends seen after that."""
        if self.done is not None:
            return True
        if time.monotonic() - self.last_check < 5:
            return False
        self.last_check = time.monotonic()
        if self.snapshot_end is None:
            if not snapshot_committed(self.config):
                return False
            self.snapshot_end = _topic_ends(self.config)
        committed = committed_offsets(self.config.spark.checkpoint_dir) or {}
        if all(int(committed.get(t, {}).get(p, 0)) >= int(o) for t, parts in self.snapshot_end.items()
               for p, o in parts.items()):
            how = "empty tables" if sum(self.totals.values()) == 0 else "connector offsets past the snapshot"
            self.complete(committed, self.snapshot_lsn, how)
        return self.done is not None


def letters_message(letters: dict[str, int], settled_since: bool = False) -> str:
    """The snapshot's dead letters as the bootstrap's last word (exit 7, errors.DeadLettersLeft)."""
    per_table = ", ".join(f"{name} {n:,}" for name, n in sorted(letters.items(), key=lambda kv: -kv[1]))
    since = " that no `cdckit dlq replay` has settled since" if settled_since else ""
    return (f"the snapshot left {sum(letters.values()):,} dead letters{since} ({per_table}): the stores are not "
            "consistent with it. `cdckit dlq list` shows why; fix the cause, then `cdckit dlq replay` and "
            "`cdckit run` (or `cdckit bootstrap` again)")


def letters_unsettled(state: BootstrapState, settled: int, end_now: int) -> bool:
    """The snapshot's letters are not all below the mark a `cdckit dlq replay` left since (their end
    unknown: every letter up to the topic's end now must be)."""
    end = state.dead_letters_end if state.dead_letters_end is not None else end_now
    return bool(state.dead_letters) and settled < end


def snapshot_letters_pending(config: Config, state: BootstrapState) -> bool:
    from connectors.kafka.dead_letter_topic import topic_end
    from pipelines.state.letters_settled import pending_from, settled_offset

    if not state.dead_letters:
        return False
    end = topic_end(config.kafka.client_config(), config.dead_letter_topic)
    return letters_unsettled(state, pending_from(settled_offset(config.spark.checkpoint_dir), end), end)


def dead_letter_end(config: Config) -> int | None:
    """The dead-letter topic's end now (None when Kafka does not say: see letters_unsettled)."""
    from connectors.kafka.dead_letter_topic import topic_end

    try:
        return topic_end(config.kafka.client_config(), config.dead_letter_topic)
    except Exception as exc:  # noqa: BLE001 - KafkaException: the verdict does not depend on it
        log.warning("dead-letter topic's end not read: %s", exc)
        return None


def bulk_applicable(config: Config, state: BootstrapState | None) -> bool:
    """The snapshot is applied in bulk when nothing was streamed yet: a checkpoint with committed
    batches is an earlier bootstrap through the streaming query, which that query finishes."""
    # A re-snapshot after lost topics goes through the stream: a surviving topic's log may begin with
    # older changes, where the bulk would stop at once and never see the new snapshot's position,
    # which the sweep needs.
    return (state is None and committed_offsets(config.spark.checkpoint_dir) is None
            and not resnapshot_pending(config))


def applied_without_spark(config: Config, totals: dict[str, int]) -> bool:
    """Whether `bootstrap --once` can do without a Spark session: already bootstrapped, or a
    snapshot the bulk applies in this process or, Spark's master being local, in local worker
    processes (the session then only takes a core from Debezium)."""
    from pipelines.bootstrap import bootstrap_bulk
    from pipelines.bootstrap.local_tasks import local_cores

    state = read_state(config)
    return state is not None or (bulk_applicable(config, state)
                                 and (bootstrap_bulk.applied_in_process(sum(totals.values()))
                                      or local_cores(config.spark.master) is not None))


def apply_in_bulk(session: Callable[[], Any], config: Config, watch: Watch, stop=None) -> None:
    """The snapshot reads into the stores by the bulk, then the watermark recorded: the tables'
    streaming query starts where the bulk stopped (state/bootstrap_state.handover). `session()`:
    the Spark session, waited for only when the snapshot is too large to apply in this process.
    Raises Interrupted on a stop request (a rerun resumes the bulk)."""
    from pipelines.bootstrap import bootstrap_bulk
    from pipelines.streaming.job import LiveConfig

    live = LiveConfig(config)
    resumed = bootstrap_state.read_bulk(config.spark.checkpoint_dir) is not None
    try:   # the stores marked and the indexes created, as a first batch does
        live.check_stores(fresh=not resumed)
    except StoreUnavailable:
        if not resumed:
            raise
        # A store lost what the interrupted bulk wrote (its marker is gone): the bulk starts over.
        log.warning("a store lost what the interrupted snapshot bulk had written: applying the snapshot again")
        bootstrap_state.clear_bulk(config.spark.checkpoint_dir)
        live.check_stores(fresh=True)
    rows = sum(watch.totals.values())
    paused = pause_refreshes(config, live.stores) if bootstrap_bulk.refreshes_paused(rows) else []
    try:
        bulk = bootstrap_bulk.run(session, config, lambda b: watch.bulk_round(b.reads),
                                  lambda: snapshot_committed(config), stop, watch.check_connector, rows=rows)
    finally:   # also when stopped or failed
        resume_refreshes(config, live.stores, paused)
    watch.bulk_round(bulk.reads)
    watch.letters = dict(bulk.dead_letters)
    lsn = max(bulk.fences.values(), default=0) or None
    watch.snapshot_lsn = lsn
    watch.complete(bulk.reached, lsn, f"bulk apply ({bulk.rounds} rounds)", doubt=bulk.unconfirmed)


def pause_refreshes(config: Config, stores) -> list[str]:
    """A large load is not searched until it is synced: its tables' index refreshes wait for its
    end (each refresh writes a segment that merges rewrite). Recorded first, so a crash in the
    load leaves a note the next start acts on (LiveConfig). A refusal (a role without the right to
    change settings) only costs the speed-up."""
    names = [t.name for t in config.flat_tables] if "search" in config.sinks else []
    if not names:
        return []
    bootstrap_state.record_refresh_paused(config.spark.checkpoint_dir, names)
    paused = []
    for name in names:
        try:
            stores.search.begin_load(stores.search_tables[name])
            paused.append(name)
        except Exception as exc:  # noqa: BLE001 - either client library's refusal
            log.warning("index %s: refreshes not paused for the load (%s: %s); it loads a little slower",
                        stores.search_tables[name].alias, type(exc).__name__, str(exc)[:200])
    return paused


def resume_refreshes(config: Config, stores, names: list[str]) -> None:
    """The configured refresh interval back on every index the load paused, and a refresh; the note
    goes once all are back (an engine away now: the next start restores them)."""
    failed = False
    for name in names:
        try:
            stores.search.end_load(stores.search_tables[name])
        except Exception as exc:  # noqa: BLE001 - the engine away: the next start restores it
            failed = True
            log.warning("index %s: refreshes not restored (%s: %s); the next `cdckit run` or `bootstrap` restores "
                        "them", stores.search_tables[name].alias, type(exc).__name__, str(exc)[:200])
    if not failed:
        bootstrap_state.clear_refresh_paused(config.spark.checkpoint_dir)


def snapshot_committed(config: Config) -> bool:
    from pipelines.ops.connector_admin import client_for

    return client_for(config).snapshot_committed(config.connector_name)


def _topic_ends(config: Config) -> dict[str, dict[str, int]]:
    topics = matching_topics(config.kafka.client_config(), config.topic_pattern)
    return end_offsets(config.kafka.client_config(), topics) if topics else {}


def resnapshot_pending(config: Config) -> bool:
    return bootstrap_state.resnapshot_pending(config.spark.checkpoint_dir)


def topics_lost(config: Config) -> list[str]:
    """Topics the pipeline has read further than they now go, that are gone, or that were created
    again since it read them (pipelines/state/topic_ids.py): the broker lost its data or someone
    recreated them."""
    committed = committed_offsets(config.spark.checkpoint_dir) or _bulk_reached(config)
    if not committed:
        return []
    recreated = TopicIds(config.spark.checkpoint_dir).recreated(topic_ids(config.kafka.client_config(),
                                                                          config.topic_pattern))
    if recreated:
        return recreated
    existing = topic_names(config.kafka.client_config())
    present = [t for t in committed if t in existing]
    try:
        ends = end_offsets(config.kafka.client_config(), present) if present else {}
    except NoFetchResponse as exc:  # partitions the broker no longer serves
        return sorted({t for t, _ in exc.tps})
    return sorted(t for t, parts in committed.items()
                  if any(int(o) > 0 for o in parts.values()) and
                  (t not in existing or any(int(ends.get(t, {}).get(p, 0)) < int(o) for p, o in parts.items())))


def _bulk_reached(config: Config) -> dict[str, dict[str, int]] | None:
    """Where the bootstrap's bulk has read to, before the streaming query committed anything."""
    bulk = bootstrap_state.read_bulk(config.spark.checkpoint_dir)
    return bulk.reached if bulk is not None else None


def start_over(config: Config) -> Path:
    """After lost topics: set the checkpoint aside (kept for inspection) and make the connector
    forget its position, so Debezium snapshots again into the new topics."""
    from connectors.connect_client import ConnectNotFound
    from pipelines.ops.connector_admin import client_for

    ckpt = config.spark.checkpoint_dir
    aside = ckpt.with_name(f"{ckpt.name}.lost-{time.strftime('%Y%m%dT%H%M%S')}")
    os.replace(ckpt, aside)
    ckpt.mkdir(parents=True)
    settled = CheckpointDir(aside).dlq_settled
    if settled.exists():   # about the dead-letter topic, not the change topics: it stays true
        shutil.copy2(settled, CheckpointDir(ckpt).dlq_settled)
    bootstrap_state.mark_resnapshot(ckpt, {"old_checkpoint": str(aside), "at": time.time()})
    client = client_for(config)
    try:
        _patiently(client.stop, config.connector_name)
    except ConnectNotFound:
        return aside  # Connect lost it too (its topics lived on the same broker): `apply` creates it
    _wait_stopped(client, config.connector_name)
    _patiently(client.reset_offsets, config.connector_name)
    _patiently(client.resume, config.connector_name)
    return aside


def _patiently(call, name: str, attempts: int = 4) -> None:
    """A Connect worker that has just lost its internal topics rebalances for a while, and holds
    requests without answering meanwhile: ask again (stop, reset and resume are idempotent)."""
    from connectors.connect_client import ConnectUnreachable

    for attempt in range(attempts):
        try:
            return call(name)
        except ConnectUnreachable:
            if attempt == attempts - 1:
                raise
            time.sleep(2)


def _wait_stopped(client, name: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if client.status(name).state == "STOPPED":
            return
        time.sleep(0.5)


def sweep_below_snapshot(config: Config, snapshot_lsn: int) -> dict[str, int]:
    """Entries the new snapshot did not rewrite are rows deleted while the topics were lost:
    remove them with a versioned delete at the snapshot's position (newer writes stay)."""
    from derived.change import Change, Position, Version
    from pipelines.apply.stores import stores_from_config

    stores = stores_from_config(config)
    cut = Version(snapshot_lsn, 0, 0)
    removed = {}
    for t in config.flat_tables:
        marker = Change(t.name, "truncate", {}, "", None, cut, Position("", 0, 0))
        removed[t.name] = (stores.search.truncate(marker, stores.search_tables[t.name])
                           + stores.cache.truncate(marker, stores.cache_tables[t.name]))
    return removed
