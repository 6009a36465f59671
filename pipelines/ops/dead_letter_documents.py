"""`cdckit dlq replay` for the letters of nested documents (issue #38.5).

A document's letter has no record in a change topic to replay: the documents' query folded many
records into it. Each lettered document is built again as its root's document is now, in Postgres
(pipelines/ops/verify_documents.py: the SQL `cdckit verify` compares with), and written at the
version its letter carries (the `cdckit.version` header), the newest letter of a document winning.
A document newer than that version already in a store stays (the write is stale there); the
content being newer than its version is harmless, as for a re-read TOAST value: every later
change of a row of the document writes the whole document again at a newer version. A root gone
since is a delete at that version. Works the same for letters written without values
(`dlq.include_values: false`): their values are never needed.

Letters written before the version header existed replay at version zero: written where the
store holds nothing for the document, stale where it holds any version.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import orjson

from connectors import postgres
from connectors.kafka.dead_letter_topic import Letter
from derived.change import Change, DeadLetter, Position, Version
from pipelines.config import Config

PREFIX = "document:"   # a documents' letter's source topic: document:<name>


def is_document_letter(letter: Letter) -> bool:
    return letter.source_topic.startswith(PREFIX)


def parse_version(text: str | None) -> Version:
    """Version.redis()'s fixed-width digits back to the version (zero when absent)."""
    if not text or len(text) != 41 or not text.isdigit():
        return Version(0, 0, 0)
    return Version(int(text[:20]), int(text[20]), int(text[21:]))


def newest_versions(letters: list[Letter]) -> dict[str, dict[str, Version]]:
    """Per document name, each lettered document id's newest letter version."""
    out: dict[str, dict[str, Version]] = {}
    for x in letters:
        if x.key is None:
            continue
        name, doc_id = x.source_topic[len(PREFIX):], x.key.decode(errors="replace")
        held = out.setdefault(name, {})
        held[doc_id] = max(held.get(doc_id, Version(0, 0, 0)), parse_version(x.version))
    return out


def key_of(doc_id: str, columns: list[str]) -> dict[str, Any]:
    """The root key of a document id (connectors/envelope.document_id reversed), as text values:
    enough to render the document's Redis key."""
    if len(columns) == 1:
        return {columns[0]: doc_id}
    return dict(zip(columns, (unquote(v) for v in doc_id.split("|"))))


def _position(table: str, i: int) -> Position:
    """Below every letter's source offset: a refusal of the rewrite is matched to its letters by
    the document's id (dead_letters.still_failing), never by a position another letter has."""
    return Position(table, 0, -1 - i)


def replay_documents(config: Config, letters: list[Letter], stores, stats, dead: list[DeadLetter]) -> int:
    """The lettered documents into the live stores (stats and refusals added to `stats`, `dead`);
    returns how many documents were written or deleted."""
    from pipelines.apply.batch import apply_changes
    from pipelines.documents.document_specs import Catalog, resolve_documents
    from pipelines.ops.verify_documents import expected_documents

    wanted = newest_versions(letters)
    known = {d.name: d for d in config.documents}
    changes: list[Change] = []
    with postgres.connect(config.postgres.reader_dsn_kwargs(), autocommit=False) as conn:
        resolved = resolve_documents(config, Catalog(conn))
        for name, versions in wanted.items():
            doc = known.get(name)
            if doc is None:
                continue   # a document no longer configured: nothing to write it to
            table, left = doc.store_table, dict(versions)
            # Every root is read (a key's text form is not a filter for every key type): a replay is rare.
            for doc_id, key, body in expected_documents(config, doc, resolved, conn):
                if doc_id in left:
                    changes.append(Change(table, "upsert", key, doc_id, body, left.pop(doc_id),
                                          _position(table, len(changes))))
            columns = list(resolved.keys[resolved.spec(name).root])
            for doc_id, version in left.items():   # roots gone since
                changes.append(Change(table, "delete", key_of(doc_id, columns), doc_id, None, version,
                                      _position(table, len(changes))))
    raw = [{"topic": c.table, "partition": 0, "offset": c.position.offset, "key": c.doc_id.encode(),
            "value": None if c.row is None else orjson.dumps(c.row)} for c in changes]
    if changes:
        apply_changes(stores, [], changes, stats, dead, raw)
    return len(changes)
