"""`cdckit dlq list|replay`: read the dead-letter topic, and apply its records again after a fix.

Replaying applies each lettered key's newest record in its source partition, not the letter
itself (`newest_records`). Versions alone do not make an old letter harmless:
- the search engine keeps one version per transaction (derived/change.py: `external`), so a
  letter from the same transaction as a later change of its key would overwrite that change;
- a row deleted after the letter has its deleted version remembered only for a while
  (`deleted_version_ttl_s` in both stores): replayed later, the letter would bring the row back;
- a truncate after the letter: the stores hold no per-table cut, so the replay drops what the
  pipeline's known cuts remove (pipelines/state/truncate_cuts.py).
The newest record of a key is in the same partition at an offset at or after the letter's
(Debezium keys records by primary key, and the partition of a key never changes while its topic
exists). Letters that still fail are reported, not written back (the originals stay in the topic).
So a letter's own value is needed only when its key is missing or its source partition can no
longer be read: letters written without values (`dlq.include_values: false`) replay the same.

A nested document's letter has no change record behind it: the document is built again in
Postgres and written at the letter's version (pipelines/ops/dead_letter_documents.py).

A replay moves the settled mark (pipelines/state/letters_settled.py) up to its first letter that
still fails (`settled_mark`): `status` counts only the letters past it.
"""
from __future__ import annotations

from typing import Any

from connectors.kafka import dead_letter_topic
from connectors.kafka.dead_letter_topic import Letter
from derived.sinks.memory import CollectedLetters
from pipelines.config import Config


def read_letters(config: Config, from_offset: int = 0) -> list[Letter]:
    """The letters of the config's dead-letter topic from an offset on."""
    return dead_letter_topic.read_letters(config.kafka.client_config(), config.dead_letter_topic, from_offset)


def newest_records(letters: list[Letter], later: dict[tuple[str, int], list[dict[str, Any]]]
                   ) -> list[dict[str, Any]]:
    """The records to replay for these letters: per lettered key, its newest record at or after the
    letter (with the newest non-tombstone before a trailing tombstone, so a delete keeps its version).
    `later` holds each source partition's records from its first letter on, in offset order;
    letters without a key, or whose partition was not read, are replayed as they are."""
    keyed: dict[tuple[str, int], set[bytes]] = {}
    for x in letters:
        if x.key is not None and (x.source_topic, x.source_partition) in later:
            keyed.setdefault((x.source_topic, x.source_partition), set()).add(x.key)
    rows: dict[tuple[str, int, int], dict[str, Any]] = {}
    for tp, records in later.items():
        newest: dict[bytes, list[dict[str, Any]]] = {}
        for r in records:
            if r["key"] in keyed.get(tp, ()):
                held = newest.setdefault(r["key"], [])
                held[:] = [h for h in held if h["value"] is not None][-1:] if r["value"] is None else []
                held.append(r)
        for held in newest.values():
            rows.update({(r["topic"], r["partition"], r["offset"]): r for r in held})
    for x in letters:
        if x.value is not None and (x.key is None or (x.source_topic, x.source_partition) not in later):
            rows[(x.source_topic, x.source_partition, x.source_offset)] = {
                "key": x.key, "value": x.value, "topic": x.source_topic, "partition": x.source_partition,
                "offset": x.source_offset}
    return [rows[k] for k in sorted(rows)]


def replayable(letter: Letter, later: dict[tuple[str, int], list[dict[str, Any]]]) -> bool:
    """The letter has something to replay: its key's records in its source partition, or its own value."""
    return (letter.key is not None and (letter.source_topic, letter.source_partition) in later) \
        or letter.value is not None


def still_failing(letters: list[Letter], failed: list[Any]) -> list[Letter]:
    """The letters whose replay failed: their key's record in their source partition was refused
    again (`failed`: derived.change.DeadLetter of the replayed records), or, replayed as they
    are, the letter's own record."""
    keys = {(d.position.topic, d.position.partition, d.key) for d in failed if d.key is not None}
    positions = {(d.position.topic, d.position.partition, d.position.offset) for d in failed}
    return [x for x in letters if (x.key is not None and (x.source_topic, x.source_partition, x.key) in keys)
            or (x.source_topic, x.source_partition, x.source_offset) in positions]


def settled_mark(letters: list[Letter], first_failing: int | None, previous: int, from_offset: int) -> int:
    """The settled mark after replaying `letters` (read from `from_offset` on; the mark was
    `previous`): up to the first letter still failing, else past the last one. A replay that
    began past the mark leaves it: the letters in between were not replayed. A letter with
    nothing to replay counts as dealt with (no replay can ever apply it; the output says so)."""
    if not letters or from_offset > previous:
        return previous
    return max(previous, letters[-1].offset + 1 if first_failing is None else first_failing)


def record_replay(config: Config, letters: list[Letter], result: dict[str, Any], from_offset: int) -> int:
    """Move the settled mark after a replay (see settled_mark); returns it."""
    from connectors.kafka.dead_letter_topic import topic_end
    from pipelines.state import letters_settled as settled

    ckpt = config.spark.checkpoint_dir
    before = settled.settled_offset(ckpt)
    previous = settled.pending_from(before, topic_end(config.kafka.client_config(), config.dead_letter_topic))
    mark = settled_mark(letters, result.get("first_failing_offset"), previous, from_offset)
    if mark != before:
        settled.record_settled(ckpt, mark)
    return mark


def _later_records(config: Config, letters: list[Letter]) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """Each lettered source partition's records from its first letter to its end now; a partition
    that can no longer be read (its topic deleted) is left out."""
    from connectors.kafka.offsets import end_offsets
    from connectors.kafka.ranges import KafkaRange, read_messages

    conf = config.kafka.client_config()
    first: dict[tuple[str, int], int] = {}
    for x in letters:
        if x.key is not None and x.source_topic and x.source_offset >= 0:
            tp = (x.source_topic, x.source_partition)
            first[tp] = min(first.get(tp, x.source_offset), x.source_offset)
    ends = end_offsets(conf, sorted({t for t, _ in first})) if first else {}
    later: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for (topic, partition), start in first.items():
        end = int(ends.get(topic, {}).get(str(partition), 0))
        if end <= start:
            continue
        records: list[dict[str, Any]] = []
        try:
            for msgs in read_messages(conf, KafkaRange(topic, partition, start, end), poll_timeout_s=30):
                records.extend({"key": m.key(), "value": m.value(), "topic": topic, "partition": partition,
                                "offset": m.offset()} for m in msgs)
        except RuntimeError:
            continue
        later[(topic, partition)] = records
    return later


def replay(config: Config, letters: list[Letter]) -> dict[str, Any]:
    """Apply the letters' keys' newest records to the live stores, in their source order."""
    from pipelines.apply.batch import ApplyOptions, apply_records
    from pipelines.apply.stores import stores_from_config
    from pipelines.state.fences import FenceStore
    from pipelines.state.truncate_cuts import TruncateCuts

    from pipelines.apply.stats import BatchStats
    from pipelines.ops.dead_letter_documents import is_document_letter, replay_documents

    stores = stores_from_config(config)
    fences = FenceStore(config.spark.checkpoint_dir).before(1 << 62)
    documents = [x for x in letters if is_document_letter(x)]
    records = [x for x in letters if not is_document_letter(x)]
    later = _later_records(config, records)
    rows = newest_records(records, later)
    collect = CollectedLetters()
    how = ApplyOptions(known_cuts=TruncateCuts(config.spark.checkpoint_dir).known)
    stats = apply_records(rows, stores, dict(fences), collect, how=how) if rows else None
    if documents:   # built again from Postgres (pipelines/ops/dead_letter_documents.py)
        stats = stats or BatchStats()
        doc_dead: list = []
        rewritten = replay_documents(config, documents, stores, stats, doc_dead)
        collect.failed.extend(doc_dead)
    failed = {(d.position.topic, d.position.partition, d.position.offset): d.reason for d in collect.failed}
    replayed = sum(1 for x in records if replayable(x, later)) + sum(1 for x in documents if x.key is not None)
    failing = still_failing(letters, collect.failed)
    return {"letters": len(letters), "replayed": replayed, "without_payload": len(letters) - replayed,
            "records_applied": len(rows) + (rewritten if documents else 0),
            "search_applied": stats.search_applied if stats else 0, "cache_applied": stats.cache_applied if stats else 0,
            "stale": (stats.search_stale + stats.cache_stale) if stats else 0,
            "still_failing": [{"source": f"{t}[{p}]@{o}", "reason": r} for (t, p, o), r in failed.items()],
            "first_failing_offset": min((x.offset for x in failing), default=None)}
