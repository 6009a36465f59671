"""The checkpoint directory and every file cdckit keeps in it: the one place that names them,
and how they are written (atomically: a reader or a crash never sees half a file).

Spark owns `query/` (the streaming query's checkpoint); the `cdckit-*.json` files beside it are
cdckit's own, each written and read by the module named here.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_json(path: Path, body: Any, indent: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(body, indent=indent))
    os.replace(tmp, path)


def read_json(path: Path, default: Any = None) -> Any:
    """The file's content, or `default` when it is missing or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return default


class _File:
    """A path under a directory's root, named once: `CheckpointDir.status` is the status file."""

    def __init__(self, name: str, doc: str):
        self.name, self.__doc__ = name, doc

    def __get__(self, folder, owner) -> Path:
        return self if folder is None else folder.root / self.name


class _Folder:
    def __init__(self, root: Path | str):
        self.root = Path(root)

    @property
    def name(self) -> str:
        return self.root.name


class CheckpointDir(_Folder):
    query = _File("query", "Spark's checkpoint of the streaming query (pipelines/state/query_offsets.py reads it).")
    status = _File("cdckit-status.json", "The last batch's status (pipelines/state/status_file.py).")
    heartbeat = _File("cdckit-heartbeat.json", "Rewritten every 2 s while `cdckit run` lives (state/status_file.py).")
    fences = _File("cdckit-fences.json", "Snapshot fences per batch (pipelines/state/fences.py).")
    topic_ids = _File("cdckit-topic-ids.json", "The ids of the topics read (pipelines/state/topic_ids.py).")
    truncates = _File("cdckit-truncates.json", "The truncates applied (pipelines/state/truncate_cuts.py).")
    bootstrap = _File("cdckit-bootstrap.json", "The snapshot's watermark (pipelines/state/bootstrap_state.py).")
    resnapshot = _File("cdckit-resnapshot.json", "A re-snapshot after lost topics under way (state/bootstrap_state.py).")
    documents_sweep = _File("cdckit-documents-sweep.json", "A re-snapshot's sweep of the nested documents, "
                            "waiting for their query to apply the snapshot (state/bootstrap_state.py).")
    snapshot_bulk = _File("cdckit-snapshot-bulk.json",
                          "The bootstrap's bulk apply of the snapshot reads, and where the streaming query takes over "
                          "(state/bootstrap_state.py).")
    refresh_paused = _File("cdckit-refresh-paused.json", "The indexes a bootstrap's bulk load paused the refreshes "
                           "of, until it restores them; a crash in between: the next start does (state/bootstrap_state.py).")
    rebuild = _File("cdckit-rebuild.json", "The running or last rebuild (pipelines/state/rebuild_state.py).")
    rebuild_live = _File("cdckit-rebuild-live.json", "The live pipeline's catch-up of a rebuild (state/rebuild_state.py).")
    rebuild_lock = _File("cdckit-rebuild.lock", "Held by the writer of a rebuild's fresh generation (state/rebuild_state.py).")
    documents = _File("cdckit-documents.json", "Which folder holds the documents' query and state (state/documents_state.py).")
    documents_lock = _File("cdckit-documents.lock", "Held by a rebuild handing the documents over (state/documents_state.py).")
    rebuild_rate = _File("cdckit-rebuild-rate.json", "Events/s a finished rebuild measured (state/rebuild_state.py).")
    dlq_settled = _File("cdckit-dlq-settled.json", "Up to where `cdckit dlq replay` settled the dead letters "
                        "(pipelines/state/letters_settled.py).")

    def rebuild_work(self, rebuild_id: str) -> "RebuildWork":
        return RebuildWork(self.root / "rebuild" / rebuild_id)


class RebuildWork(_Folder):
    """One rebuild's folder. Its catch-up is a streaming query with a checkpoint of its own
    (`catchup`); that query's fences are kept in this folder, as CheckpointDir names them."""

    state_copy = _File("state.json", "The state as the rebuild finished.")
    bulk = _File("bulk.json", "The bulk's result per partition.")
    catchup = _File("catchup", "The catch-up query's checkpoint (Spark's).")
    # The bulk tasks' progress and the driver's stop request are not here: tasks run on any host
    # and report to a Kafka consumer group (state/rebuild_state.progress_group).
