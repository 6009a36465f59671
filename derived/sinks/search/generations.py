"""Search index generations: `<alias>_v<N>` indices behind one alias, switched atomically.

A rebuild fills a fresh generation that no reader sees, then one `_aliases` call moves the alias
(and its write index) from the old index to the new one: readers see the old index or the new one,
never neither.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from derived.sinks.store_errors import GenerationError
from derived.sinks.search.definition import with_gc_deletes
from derived.sinks.search.engines import Engine


@dataclass(frozen=True)
class SearchGeneration:
    alias: str
    current: str | None     # the index the alias points to now (None: no alias yet)
    target: str             # the fresh index a rebuild fills


def generation_number(alias: str, index: str) -> int:
    m = re.fullmatch(re.escape(alias) + r"_v(\d+)", index)
    return int(m[1]) if m else 0


def plan_generation(engine: Engine, alias: str) -> SearchGeneration:
    """The next free `<alias>_v<N>` above the current one."""
    current = engine.alias_targets(alias)
    if len(current) > 1:
        raise GenerationError(f"alias {alias} points to {len(current)} indices ({', '.join(current)}); "
                              "cdckit expects one")
    if not current and engine.index_exists(alias):
        raise GenerationError(f"an index named {alias} stands where the alias should be (an engine auto-creates "
                              "one when something writes to a missing alias); delete it, then rebuild")
    cur = current[0] if current else None
    n = generation_number(alias, cur) + 1 if cur else 1
    while engine.index_exists(f"{alias}_v{n}"):
        n += 1
    return SearchGeneration(alias, cur, f"{alias}_v{n}")


def create_generation(engine: Engine, gen: SearchGeneration, definition: dict | None, resume: bool,
                      gc_deletes_s: int | None = None) -> None:
    """Create the fresh index with this definition (derived/sinks/search/definition.py: the config's,
    as it is now: a definition change reaches the index only this way, never in place). An existing
    one is only reused when resuming this same rebuild: writing a replay into an index anyone reads
    would put older versions into a live index."""
    if gen.target in engine.alias_targets(gen.alias):
        raise GenerationError(f"{gen.target} is the live index of {gen.alias}; a replay never writes into it")
    if engine.index_exists(gen.target):
        if resume:
            return
        raise GenerationError(f"index {gen.target} exists already; refusing to replay into it")
    # The live pipeline writes this generation too while the catch-up replays older changes into
    # it: a delete's version must outlive the rebuild, or the catch-up's older write resurrects the row.
    engine.create_index(gen.target, with_gc_deletes(definition, gc_deletes_s))


def switch_generation(engine: Engine, gen: SearchGeneration) -> None:
    """One atomic alias update: the alias leaves the old index and lands on the new one."""
    engine.refresh(gen.target)
    old = [i for i in engine.alias_targets(gen.alias) if i != gen.target]
    engine.point_alias(gen.alias, gen.target, old)
    # Again: writes between the first refresh and the switch may sit under a published visibility
    # position (pipelines/streaming/visibility_publisher.py) that readers now search through the alias.
    engine.refresh(gen.target)


def drop_generation(engine: Engine, index: str, alias: str) -> None:
    if index in engine.alias_targets(alias):
        raise GenerationError(f"{index} is still behind {alias}; not deleting it")
    if engine.index_exists(index):
        engine.delete_index(index)


@dataclass
class SearchGenerations:
    """A rebuild's calls on the search store's generations, with its engine (the functions above);
    made from the config by pipelines/apply/stores.py, as the cache's are."""

    engine: Engine
    gc_deletes_s: int | None = None

    def plan(self, alias: str) -> SearchGeneration:
        return plan_generation(self.engine, alias)

    def create(self, gen: SearchGeneration, definition: dict | None, resume: bool) -> None:
        create_generation(self.engine, gen, definition, resume, self.gc_deletes_s)

    def mark(self, prefix: str, definition: dict | None) -> None:
        """The store marker, before the switch: the live pipeline never sees a switched store without one."""
        from derived.sinks import markers

        markers.mark_search(self.engine, prefix, definition)

    def switch(self, gen: SearchGeneration) -> None:
        switch_generation(self.engine, gen)

    def drop(self, index: str, alias: str) -> None:
        drop_generation(self.engine, index, alias)
