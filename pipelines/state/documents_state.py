"""Where the nested documents' query keeps its checkpoint and state, and how a rebuild hands a
fresh one over.

The documents' state is history: a document's version is the highest of every change that ever
reached it, departed parts and versions handed out included (derived/nested.py). A rebuild
therefore builds the documents with a state of its own, folded from the compacted topics in a
folder of its own (`documents-<rebuild id>`), written only into its fresh generations; at its
switch that folder becomes the live one (`cdckit-documents.json` names it) and the running job
moves its documents' query there (pipelines/documents/documents_query.LiveDocuments).

Two states never write one store: one may have read a partition further than the other and
handed a document out at a version the other never reached, so the other's delete of it would be
refused and the document come back (tests/unit/pipelines/apply/test_nested_fold.py has the case).
The rebuild holds `handover_lock` from its last replay to the hand-over, and marks the hand-over
`pending` first: the live query's batches take the lock (uncontended but for a rebuild's last
seconds) and write nothing while a hand-over is pending (they wait: a rerun of a rebuild that died in between completes it,
and a rebuild that failed before its switch cancels it). Once handed over, the old query's
batches are not written; it is stopped and the new one started.
"""
from __future__ import annotations

import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from pipelines.state.checkpoint import CheckpointDir, read_json, write_json
from pipelines.state.locks import file_lock

FIRST = "documents"
HELD = "cdckit-documents-held.json"   # per partition, the lowest offset of a record waiting for its transaction


def _read(checkpoint_dir: Path) -> dict:
    return read_json(CheckpointDir(checkpoint_dir).documents) or {}


def current(checkpoint_dir: Path) -> Path:
    """The folder the live documents' query runs from."""
    return Path(checkpoint_dir) / str(_read(checkpoint_dir).get("folder") or FIRST)


def pending(checkpoint_dir: Path) -> str | None:
    """The folder a rebuild is handing over to, until it has (or cancelled)."""
    body = _read(checkpoint_dir)
    handover = body.get("handover")
    return handover if handover and handover != (body.get("folder") or FIRST) else None


def fresh(checkpoint_dir: Path, rebuild_id: str) -> Path:
    """A rebuild's own folder, filled by its replay."""
    return Path(checkpoint_dir) / f"{FIRST}-{rebuild_id}"


def begin_handover(checkpoint_dir: Path, folder: Path) -> None:
    write_json(CheckpointDir(checkpoint_dir).documents, {"folder": current(checkpoint_dir).name, "handover": folder.name})


def cancel_handover(checkpoint_dir: Path) -> None:
    write_json(CheckpointDir(checkpoint_dir).documents, {"folder": current(checkpoint_dir).name})


def adopt(checkpoint_dir: Path, folder: Path) -> None:
    """From now on the live documents' query runs from `folder`."""
    write_json(CheckpointDir(checkpoint_dir).documents, {"folder": folder.name})


@contextmanager
def handover_lock(checkpoint_dir: Path) -> Iterator[None]:
    with file_lock(CheckpointDir(checkpoint_dir).documents_lock):
        yield


def remove_stale(checkpoint_dir: Path, keep: set[Path]) -> list[Path]:
    """Folders of states no query runs from any more (a finished rebuild's predecessor)."""
    gone = []
    for folder in Path(checkpoint_dir).glob(f"{FIRST}*"):
        if folder.is_dir() and folder not in keep and (folder.name == FIRST or folder.name.startswith(FIRST + "-")):
            shutil.rmtree(folder, ignore_errors=True)
            gone.append(folder)
    return gone


def save_held(folder: Path, holding: dict[str, dict[str, int]]) -> None:
    """Written by each batch before Spark commits it: a committed offset says the record was read,
    not that it reached the stores (pipelines/apply/transaction_gate.py holds incomplete transactions)."""
    write_json(Path(folder) / HELD, holding)


def applied(folder: Path) -> dict[str, dict[str, int]] | None:
    """Offsets up to which the documents' stores hold every record: the query's last commit, capped at
    the records still held for their transactions (the held file may be a batch newer than the
    commit: lower, never higher, than the truth)."""
    from pipelines.state.query_offsets import committed_offsets

    committed = committed_offsets(Path(folder))
    if committed is None:
        return None
    held = read_json(Path(folder) / HELD, {}) or {}
    return {t: {p: min(int(o), int(held.get(t, {}).get(str(p), o))) for p, o in parts.items()}
            for t, parts in committed.items()}
