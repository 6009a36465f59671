"""One micro-batch of change records folded into a nested-document state, and the documents it
changed. Plain Python: the Spark stateful operator (pipelines/documents/documents_query.py) keeps the
state between batches in its checkpoint and only calls this.

Records come in any order across partitions (the model takes that, see derived/nested.py) and in
offset order within one (sorted here). A tombstone without its delete record (compaction removed
the delete before it was read) deletes the row held, at the held row's version."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from connectors.envelope import decode_records, document_id
from derived.change import UNKNOWN, Change, Version
from derived.nested import NestedState
from pipelines.apply.transaction_gate import TransactionGate


@dataclass
class FoldState:
    """What the operator keeps per document between batches (pickled into the state store)."""
    model: NestedState
    fences: dict[str, int] = field(default_factory=dict)   # snapshot fence per topic-partition (see decode)
    gate: TransactionGate | None = None    # whole transactions only (see transaction_gate); None: as read


@dataclass
class DocumentOut:
    doc_id: str
    key: dict[str, Any]
    doc: dict[str, Any] | None      # None: delete
    version: Version


@dataclass
class FoldStats:
    records: int = 0
    changes: int = 0
    dead: int = 0
    documents: int = 0
    widest_fan_out: int = 0          # the most documents one change touched
    fan_out_documents: int = 0       # documents touched by changes to rows shared between documents
    pruned: int = 0                  # deleted rows forgotten before the batch (written by the batch before)
    held: int = 0                    # records waiting for the rest of their transaction
    late: int = 0                    # transactions let through incomplete (transaction_gate: compaction, a lost END)
    late_example: str = ""           # the first of them, and what it lacked
    holding: dict[str, dict[str, int]] = field(default_factory=dict)   # topic -> partition -> lowest held offset
    timings: dict[str, float] = field(default_factory=dict)   # filled by the caller (state load/save)


def fold_batch(state: FoldState, rows: list[dict[str, Any]], key_columns: dict[str, list[str] | None],
               truncate_table: str | None, typed: dict[str, Callable[[dict], dict]],
               reread: Callable[[list[Change]], int] | None = None) -> tuple[list[DocumentOut], FoldStats, list]:
    """Fold raw Kafka records (key, value, topic, partition, offset) into `state`; the documents
    of every root they touched, and decode failures (dead letters). `reread` fills unchanged TOAST
    columns from Postgres (pipelines/apply/toast_reread.py) for rows the state does not hold: a
    key's first record after a primary-key change, or after compaction kept only an update."""
    model = state.model
    stats = FoldStats(records=len(rows))
    # The previous batch is written and committed (a state is only ever loaded from a committed batch):
    # the rows it deleted are in every store, so the state forgets them (issue #38.8).
    stats.pruned = model.prune()
    gate = state.gate
    if gate is not None:
        rows, passed = gate.admit(rows)
        stats.held, stats.late, stats.holding = passed.held, passed.late, gate.holding()
        stats.late_example = passed.example
    tombstones: list[Change] = []
    tables = set(model.rows)
    changes, dead, _, _ = decode_records(rows, state.fences, key_columns, tables, tombstones, truncate_table)
    stats.changes, stats.dead = len(changes), len(dead)
    ordered = sorted([*changes, *tombstones], key=lambda c: (c.position.topic, c.position.partition,
                                                             c.position.offset))
    if reread is not None:
        # (and columns Debezium could not render, `reread`, whether the row is held or not)
        unheld = [c for c in changes if c.op == "upsert" and c.unavailable
                  and (c.reread or model.held_version(c.table, _typed_key(c, typed)) is None)]
        if unheld:
            reread(unheld)
    touched: set[tuple] = set()
    converters = {t: typed.get(t) for t in tables}   # (a LiveTypes makes one per call)
    for change in ordered:
        _type(change, converters)
        if change.tombstone:
            change = _tombstone_delete(model, change)
            if change is None:
                continue
        roots = model.apply(change)
        if change.table != model.spec.root and len(roots) > 1:
            stats.fan_out_documents += len(roots)
        stats.widest_fan_out = max(stats.widest_fan_out, len(roots))
        touched |= roots
    out = []
    root_cols = list(model.keys[model.spec.root])
    for root in sorted(touched, key=repr):
        doc, version = model.document(root)
        key = dict(zip(root_cols, root))
        out.append(DocumentOut(document_id(key, root_cols), key, doc, version))
    stats.documents = len(out)
    return out, stats, dead


def _type(change: Change, typed: dict[str, Callable[[dict], dict]]) -> None:
    """Values typed as the flat documents' are (pipelines/apply/typed_rows.py), keys too: the model
    joins a row's columns with another's key, so both sides must be in one rendering."""
    convert = typed.get(change.table)
    if convert is None:
        return
    if change.row is not None:
        change.row = convert(change.row)
    if change.key:
        change.key = convert(change.key)


def _typed_key(change: Change, typed: dict[str, Callable[[dict], dict]]) -> dict[str, Any]:
    convert = typed.get(change.table)
    return convert(change.key) if convert is not None else change.key


def _tombstone_delete(model: NestedState, t: Change) -> Change | None:
    version = model.held_version(t.table, t.key)
    if version is None:
        return None  # nothing held: the key's earlier records were compacted away with it
    return Change(t.table, "delete", t.key, t.doc_id, None, max(version, UNKNOWN), t.position)
