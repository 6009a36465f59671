"""After a re-snapshot (`cdckit bootstrap` after lost topics), the nested documents of roots
deleted while the topics were lost are swept, once the documents' query has applied the snapshot.
Called by that query between batches (documents_query.LiveDocuments.tend) and by the bootstrap's
wait for the documents (`bootstrap --once`)."""
from __future__ import annotations

import logging

from connectors.kafka.clients import existing_topics
from connectors.kafka.offsets import end_offsets
from pipelines.config import Config
from pipelines.state import bootstrap_state, documents_state

log = logging.getLogger("cdckit.bootstrap")


def documents_topic_ends(config: Config) -> dict[str, dict[str, int]]:
    """The end offsets of the topics the nested documents read (see documents_applied)."""
    topics = existing_topics(config.kafka.client_config(), config.document_change_topics)
    return end_offsets(config.kafka.client_config(), topics) if topics else {}


def documents_applied(config: Config, ends: dict[str, dict[str, int]]) -> bool:
    """The documents' query has committed every record up to `ends`."""
    committed = documents_state.applied(documents_state.current(config.spark.checkpoint_dir)) or {}
    return all(int(committed.get(t, {}).get(p, 0)) >= int(o) for t, parts in ends.items() for p, o in parts.items())


def sweep_documents_when_applied(config: Config) -> dict[str, int] | None:
    """After a re-snapshot, the nested documents of roots deleted while the topics were lost: every
    live root's document was rendered again from the snapshot (its version is at least the
    snapshot's), so once the documents' query has applied the snapshot, a document below it is one
    no row makes any more. None while there is nothing to sweep, or the query is not there yet."""
    pending = bootstrap_state.documents_sweep(config.spark.checkpoint_dir)
    if pending is None or not documents_applied(config, pending["ends"]):
        return None
    from derived.change import Change, Position, Version
    from pipelines.apply.stores import stores_from_config

    stores = stores_from_config(config)
    cut = Version(int(pending["snapshot_lsn"]), 0, 0)
    removed = {}
    for doc in config.documents:
        marker = Change(doc.store_table, "truncate", {}, "", None, cut, Position("", 0, 0))
        removed[doc.store_table] = (stores.search.truncate(marker, stores.search_tables[doc.store_table])
                                    + stores.cache.truncate(marker, stores.cache_tables[doc.store_table]))
    state = bootstrap_state.read_state(config.spark.checkpoint_dir)
    if state is not None:
        state.removed_after_lost_topics = {**(state.removed_after_lost_topics or {}), **removed}
        bootstrap_state.write_state(config.spark.checkpoint_dir, state)
    bootstrap_state.clear_documents_sweep(config.spark.checkpoint_dir)
    log.info("re-snapshot: documents of roots deleted while the topics were lost removed: %s",
             ", ".join(f"{name} {n}" for name, n in removed.items()))
    return removed
