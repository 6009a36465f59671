"""Nested documents: one document per root row, built from related tables' rows, kept exact as any
of them changes, in any arrival order.

Pure state model (no Spark, no I/O): `NestedState` holds the latest version of every row of the
tables a document spec names (a deleted row keeps its version and its last join values), and
`apply(change)` returns the roots whose documents the change touches (both roots of a child that
moved, every root of a shared parent that changed, every root of a truncated table's rows). The
document of a root is then a pure function of those latest rows (`document`); its version is the
highest among the changes that reached it, its parts' and the versions it was handed out at before,
so it never goes down, and a re-delivered change yields the same document at the same version.

Relations (`Relation.kind`):
- one_to_many: rows of `table` whose `join` columns equal the parent's (`{order_id: id}`: line.order_id
  = order.id), a list sorted by `order_by` then key;
- many_to_one: the one row of `table` the parent points at (`{customer_id: id}`: order.customer_id =
  customer.id), an object or null;
- many_to_many: rows of the link `table` joined to the parent by `join`, each replaced by the row of
  `through.table` it points at (`through.join`: link.tag_id = tag.id), a list.
Relations nest: a relation's own `relations` hang off each of its rows (a line's product).

A table's columns can be renamed in the document (`rename`: column -> field). A relation with a
`value` column holds that column's values instead of its rows' objects (a list of
tag names; many_to_one: the one value, or null). A list relation with `empty_null` shows null where
it has no rows (pgsync's rendering) instead of [].

A spec with `meta` adds `_meta` (pgsync's field): bare table name -> key column -> the sorted,
distinct key values of that table's rows in the document (the root's, the link rows' included).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Iterable

from derived.change import Change, Version

ZERO = Version(0, 0, 0)
Key = tuple  # a row's key values, in key-column order
# Worked out per process, or the journal of what changed since the state was saved (take_changes).
_NOT_PICKLED = frozenset({"_kept", "_by_table", "rows", "touched", "_changed_rows", "_changed_touched"})


@dataclass(frozen=True)
class Through:
    table: str
    join: tuple[tuple[str, str], ...]   # (link column, through-table column)


@dataclass(frozen=True)
class Relation:
    label: str
    table: str
    kind: str                            # one_to_many | many_to_one | many_to_many
    join: tuple[tuple[str, str], ...]    # see the module docstring for each kind's direction
    columns: tuple[str, ...] | None = None
    order_by: str | None = None
    through: Through | None = None
    relations: tuple["Relation", ...] = ()
    # Rendering only, not what the state holds: left out of the repr, which names the state a
    # documents' checkpoint was built for (document_specs.fingerprint).
    value: str | None = field(default=None, repr=False)      # a scalar relation: this column's values
    empty_null: bool = field(default=False, repr=False)      # an empty list shows null, not []
    rename: tuple[tuple[str, str], ...] = field(default=(), repr=False)   # column -> field in the document

    @cached_property
    def sides(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(the join's left columns, its right ones), worked out once (kept in the instance's dict, past the frozen
        dataclass's __setattr__; not a field, so neither in its repr nor its equality)."""
        return tuple(c for c, _ in self.join), tuple(p for _, p in self.join)


@dataclass(frozen=True)
class DocumentSpec:
    name: str
    root: str
    columns: tuple[str, ...] | None = None
    relations: tuple[Relation, ...] = ()
    rename: tuple[tuple[str, str], ...] = field(default=(), repr=False)   # the root's column -> field
    meta: bool = field(default=False, repr=False)   # add `_meta`: the keys of the rows that built it

    def tables(self) -> set[str]:
        out = {self.root}

        def walk(rels):
            for r in rels:
                out.add(r.table)
                if r.through:
                    out.add(r.through.table)
                walk(r.relations)

        walk(self.relations)
        return out


@dataclass
class _Row:
    values: dict[str, Any]
    version: Version
    live: bool


@dataclass
class _Edge:
    """One way a row of `table` is reached from a row of `parent`: the parent's `parent_cols` equal
    this row's `cols` (both directions of every kind reduce to this)."""
    table: str
    cols: tuple[str, ...]
    parent: str
    parent_cols: tuple[str, ...]


@dataclass
class NestedState:
    spec: DocumentSpec
    keys: dict[str, tuple[str, ...]]          # table -> key columns
    rows: dict[str, dict[Key, _Row]] = field(default_factory=dict)
    touched: dict[Key, Version] = field(default_factory=dict)   # root key -> newest change that reached it
    cuts: dict[str, Version] = field(default_factory=dict)      # table -> its newest truncate
    _edges: list[_Edge] = field(default_factory=list)
    _index: dict[tuple[str, tuple[str, ...]], dict[tuple, set[Key]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._journal_reset()
        missing = self.spec.tables() - set(self.keys)
        if missing:
            raise ValueError(f"no key columns for {sorted(missing)}")
        for table in self.spec.tables():
            self.rows.setdefault(table, {})
        self._edges = join_edges(self.spec)
        for e in self._edges:  # rows are looked up by the columns of both ends of every edge
            self._index.setdefault((e.table, e.cols), {})
            self._index.setdefault((e.parent, e.parent_cols), {})

    # -- changes ---------------------------------------------------------------------------------
    def apply(self, change: Change) -> set[Key]:
        """Fold one change in; the root keys whose documents it changes (empty when it is older
        than what is held, or names a table the spec does not use)."""
        if change.table not in self.rows:
            return set()
        if change.op == "truncate":
            return self._truncate(change.table, change.version)
        key = tuple(map(change.key.__getitem__, self.keys[change.table]))
        held = self.rows[change.table].get(key)
        if held is not None and change.version < held.version:
            return set()  # older than what is held: refused, as the stores refuse it
        if change.version < self.cuts.get(change.table, ZERO):
            return set()  # written before a truncate already applied (another partition's late record)
        was_live = held is not None and held.live
        before = self._roots_of(change.table, held.values) if was_live else set()
        if change.op == "delete":
            values = held.values if held is not None else dict(change.key)
        else:
            values = dict(change.row or {})
            for col in change.unavailable:  # an unchanged TOAST column: the value held stays
                if held is not None and col in held.values:
                    values[col] = held.values[col]
                else:
                    values.pop(col, None)
            kept = self._kept_columns().get(change.table)
            if kept is not None:   # only what a document shows or joins by (see held_columns)
                values = {c: v for c, v in values.items() if c in kept}
        if change.op == "delete":
            roots = before
        elif was_live and self._same_reach(change.table, held.values, values):
            roots = before   # the columns that place the row (its key, its joins) did not change
        else:
            roots = before | self._roots_of(change.table, values)
        self._put(change.table, key, _Row(values, change.version, live=change.op != "delete"))
        for r in roots:
            self.touched[r] = max(self.touched.get(r, ZERO), change.version)
        self._changed_touched |= roots
        return roots

    def _same_reach(self, table: str, old: dict[str, Any], new: dict[str, Any]) -> bool:
        """Whether two versions of a row reach the same roots: `_roots_of` reads a row's key and
        the columns of the joins from its table, nothing else of it."""
        cols = self._derived()[2][table]
        return list(map(old.get, cols)) == list(map(new.get, cols))

    def _derived(self) -> tuple[dict[str, list[_Edge]], dict[str, list[tuple[tuple[str, ...], dict]]],
                                dict[str, tuple[str, ...]]]:
        """Per table: the edges leading from its rows to their parents, its indexes (columns, index),
        the columns that place its rows (key and joins). Lookups of the hot paths, worked out once per
        process like _kept and never pickled (__getstate__)."""
        derived = self.__dict__.get("_by_table")
        if derived is None:
            up: dict[str, list[_Edge]] = {t: [] for t in self.keys}
            for e in self._edges:
                up.setdefault(e.table, []).append(e)
            indexes: dict[str, list[tuple[tuple[str, ...], dict]]] = {t: [] for t in self.keys}
            for (t, cols), idx in self._index.items():
                indexes.setdefault(t, []).append((cols, idx))
            reach = {t: tuple(dict.fromkeys((*cols, *(c for e in up.get(t, ()) for c in e.cols))))
                     for t, cols in self.keys.items()}
            derived = self._by_table = (up, indexes, reach)
        return derived

    def _kept_columns(self) -> dict[str, frozenset[str] | None]:
        # Worked out once per process from this version's rule: never pickled (__getstate__), so a
        # state kept by a checkpoint follows the rule of the code that loads it.
        kept = self.__dict__.get("_kept")
        if kept is None:
            kept = self._kept = held_columns(self.spec, self.keys, self._edges)
        return kept

    def __getstate__(self) -> dict[str, Any]:
        # Rows and versions as plain tuples: a dataclass and a NamedTuple per row made pickling the
        # whole state, which a documents batch does twice, 2.5x slower (benchmarks/nested_state_churn.py).
        state = {k: v for k, v in self.__dict__.items() if k not in _NOT_PICKLED}
        state["flat_rows"] = {t: {k: (r.values, *r.version, r.live) for k, r in rows.items()}
                              for t, rows in self.rows.items()}
        state["flat_touched"] = {k: (*v,) for k, v in self.touched.items()}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        flat = state.pop("flat_rows", None)
        if flat is not None:   # (a state pickled before 0.2 holds the objects themselves)
            new_version = tuple.__new__   # Version's own __new__ is Python code: one call a row saved
            state["rows"] = {t: {k: _Row(v, new_version(Version, (e, kind, lsn)), live)
                                 for k, (v, e, kind, lsn, live) in rows.items()} for t, rows in flat.items()}
            state["touched"] = {k: new_version(Version, v) for k, v in state.pop("flat_touched").items()}
        self.__dict__.update(state)
        self._journal_reset()

    # -- what changed since the last take (a saved state's delta) ---------------------------------
    def _journal_reset(self) -> None:
        self._changed_rows: set[tuple[str, Key]] = set()
        self._changed_touched: set[Key] = set()

    def take_changes(self) -> dict[str, Any]:
        """What changed since the state was loaded or last asked, as plain tuples (a row or a
        root's version; None: gone), and the truncates' cuts whole; the journal starts again.
        `apply_changes` of it on the state as it was then gives the state as it is now."""
        rows: dict[str, dict[Key, tuple | None]] = {}
        for table, key in self._changed_rows:
            r = self.rows[table].get(key)
            rows.setdefault(table, {})[key] = None if r is None else (r.values, *r.version, r.live)
        touched = {k: (None if (v := self.touched.get(k)) is None else (*v,)) for k in self._changed_touched}
        self._journal_reset()
        return {"rows": rows, "touched": touched, "cuts": {t: (*v,) for t, v in self.cuts.items()}}

    def apply_changes(self, changes: dict[str, Any]) -> None:
        """A delta of `take_changes` applied (the indexes kept); the journal left empty."""
        new_version = tuple.__new__
        for table, rows in changes["rows"].items():
            held = self.rows[table]
            for key, flat in rows.items():
                if flat is not None:
                    values, epoch, kind, lsn, live = flat
                    self._put(table, key, _Row(values, new_version(Version, (epoch, kind, lsn)), live))
                elif key in held:
                    old = held[key]
                    if old.live:
                        for cols, idx in self._derived()[1][table]:
                            idx.get(_vals(old.values, cols), set()).discard(key)
                    del held[key]
        for key, v in changes["touched"].items():
            if v is None:
                self.touched.pop(key, None)
            else:
                self.touched[key] = new_version(Version, v)
        self.cuts = {t: new_version(Version, v) for t, v in changes["cuts"].items()}
        self._journal_reset()

    def prune(self) -> int:
        """Forget deleted rows; call it only once the documents of every change folded so far are in
        the stores (the fold calls it before a batch: the previous batch was written and committed).
        Returns how many rows went.

        Nothing needs them: a key's changes come in offset order from one partition, so no older
        change of a deleted key can follow its delete (a truncate's `cuts` stay, for other partitions'
        rows written before it). What is kept is the version a deleted root's document was deleted
        at, when a part from another partition had raised it above the root's own delete: a root
        inserted again later must not come back below it (its document would be refused). Without
        such a part the root's next insert, later in the same partition, is above it anyway. So the
        state holds the live rows, not the history of every row that ever was."""
        gone = 0
        root = self.spec.root
        for table, rows in self.rows.items():
            dead = [k for k, r in rows.items() if not r.live]   # never in the indexes (only live rows are)
            for k in dead:
                if table == root and self.touched.get(k, ZERO) <= rows[k].version:
                    self.touched.pop(k, None)
                    self._changed_touched.add(k)
                del rows[k]
                self._changed_rows.add((table, k))
            gone += len(dead)
        return gone

    def held_version(self, table: str, key: dict[str, Any]) -> Version | None:
        """The version of the live row held for `key`, or None."""
        held = self.rows.get(table, {}).get(tuple(key.get(c) for c in self.keys[table]))
        return held.version if held is not None and held.live else None

    def _truncate(self, table: str, version: Version) -> set[Key]:
        self.cuts[table] = max(self.cuts.get(table, ZERO), version)
        gone = [(key, row) for key, row in self.rows[table].items() if row.version < version]
        roots: set[Key] = set()
        for _, row in gone:
            if row.live:
                roots |= self._roots_of(table, row.values)
        for key, row in gone:
            self._put(table, key, _Row(row.values, version, live=False))
        for r in roots:
            self.touched[r] = max(self.touched.get(r, ZERO), version)
        self._changed_touched |= roots
        return roots

    def _put(self, table: str, key: Key, row: _Row) -> None:
        old = self.rows[table].get(key)
        for cols, idx in self._derived()[1][table]:
            if old is not None and old.live:
                idx.get(_vals(old.values, cols), set()).discard(key)
            if row.live:
                idx.setdefault(_vals(row.values, cols), set()).add(key)
        self.rows[table][key] = row
        self._changed_rows.add((table, key))

    def _lookup(self, table: str, cols: tuple[str, ...], values: tuple) -> list[dict[str, Any]]:
        if None in values:
            return []  # NULL joins nothing, as in SQL
        keys = self._index[(table, cols)].get(values, ())
        return [self.rows[table][k].values for k in keys]

    def _roots_of(self, table: str, values: dict[str, Any]) -> set[Key]:
        """The roots whose documents hold this row (through every path the spec gives its table).
        Rows are visited once: a spec can name a table twice (an employee's manager, an order's
        lines' order) and rows can point at each other."""
        out: set[Key] = set()
        seen: set[tuple[str, tuple]] = set()
        pending = [(table, values)]
        up, root = self._derived()[0], self.spec.root
        while pending:
            t, v = pending.pop()
            ident = (t, _vals(v, self.keys[t]))
            if ident in seen:
                continue
            seen.add(ident)
            if t == root:
                out.add(ident[1])
            for e in up[t]:
                pending.extend((e.parent, p) for p in self._lookup(e.parent, e.parent_cols, _vals(v, e.cols)))
        return out

    # -- documents -------------------------------------------------------------------------------
    def document(self, root: Key) -> tuple[dict[str, Any] | None, Version]:
        """(the document, its version); None while the root row does not exist (a child that came
        first is held until it does; a deleted root's document is deleted at this version)."""
        root = tuple(root)
        row = self.rows[self.spec.root].get(root)
        parts: list[Version] = [self.touched.get(root, ZERO)]
        if row is None:
            return None, parts[0]
        parts.append(row.version)
        # The rows that point at the root are its parts even while it is deleted (a child that came
        # first, or outlived it).
        seen: dict[str, set[Key]] | None = {self.spec.root: {root}} if self.spec.meta else None
        nested = self._nest(row.values, self.spec.relations, parts, seen)
        # A version handed out is remembered: a part that leaves later (a line's product, with the
        # line) takes its version with it, and the next document must not go below this one.
        version = self.touched[root] = max(parts)
        self._changed_touched.add(root)
        if not row.live:
            return None, version
        doc = _project(row.values, self.spec.columns, self.spec.rename)
        doc.update(nested)
        if seen is not None:
            doc[META] = meta_field(seen, self.keys)
        return doc, version

    def _nest(self, parent: dict[str, Any], relations: Iterable[Relation], parts: list[Version],
              seen: dict[str, set[Key]] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for rel in relations:
            here, there = rel.sides
            if rel.kind == "many_to_one":
                found = self._lookup(rel.table, there, _vals(parent, here))
                target = (found[0] if len(found) == 1 else
                          min(found, key=lambda v: sortable(_vals(v, self.keys[rel.table]))) if found else None)
                out[rel.label] = self._shaped(rel, rel.table, target, parts, seen) if target is not None else None
                continue
            children = self._lookup(rel.table, here, _vals(parent, there))
            table = rel.table
            if rel.kind == "many_to_many":
                assert rel.through is not None
                link_cols = tuple(c for c, _ in rel.through.join)
                far_cols = tuple(c for _, c in rel.through.join)
                far: list[dict[str, Any]] = []
                for link in children:
                    link_key = _vals(link, self.keys[rel.table])
                    parts.append(self.rows[rel.table][link_key].version)
                    rows = self._lookup(rel.through.table, far_cols, _vals(link, link_cols))
                    if seen is not None and rows:   # a link to no row shows nothing: not in _meta
                        seen.setdefault(rel.table, set()).add(link_key)
                    far.extend(rows)
                children = far
                table = rel.through.table
            children.sort(key=lambda v: (sortable((v.get(rel.order_by),)) if rel.order_by else (),
                                         sortable(_vals(v, self.keys[table]))))
            shown = [self._shaped(rel, table, c, parts, seen) for c in children]
            out[rel.label] = None if rel.empty_null and not shown else shown
        return out

    def _shaped(self, rel: Relation, table: str, values: dict[str, Any], parts: list[Version],
                seen: dict[str, set[Key]] | None) -> Any:
        key = _vals(values, self.keys[table])
        parts.append(self.rows[table][key].version)
        if seen is not None:
            seen.setdefault(table, set()).add(key)
        if rel.value is not None:
            return values.get(rel.value)
        doc = _project(values, rel.columns, rel.rename)
        if rel.relations:
            doc.update(self._nest(values, rel.relations, parts, seen))
        return doc


META = "_meta"


def meta_field(seen: dict[str, set[Key]], keys: dict[str, tuple[str, ...]]) -> dict[str, dict[str, list]]:
    """`_meta` from the keys of the rows each table gave a document: bare table name -> key column
    -> its distinct values, sorted (the same document whatever order the rows were found in)."""
    out: dict[str, dict[str, list]] = {}
    for table, found in seen.items():
        cols = keys[table]
        out[table.split(".", 1)[-1]] = {c: sorted({k[i] for k in found}, key=lambda v: sortable((v,)))
                                        for i, c in enumerate(cols)}
    return out


def held_columns(spec: DocumentSpec, keys: dict[str, tuple[str, ...]], edges: list[_Edge] | None = None,
                 *, value_column_only: bool = False) -> dict[str, frozenset[str] | None]:
    """The columns of each table's rows the state needs (None: every column): what the document
    shows (`columns`), sorts by, joins by and keys by. A wide table's other columns are not held,
    so they cost nothing in the state pickled every batch. A relation rendered as one column's
    values (`value`) keeps every column: `value` is rendering only, not in the state's fingerprint,
    so the column it names may change without the state being built anew. (`value_column_only`:
    that one column, what the document renders, for a schema watch.)"""
    out: dict[str, set[str] | None] = {}

    def need(table: str, cols: Iterable[str] | None) -> None:
        merge_columns(out, table, cols)

    need(spec.root, spec.columns)

    def walk(relations: Iterable[Relation]) -> None:
        for rel in relations:
            shown = rel.columns if rel.value is None else (rel.value,) if value_column_only else None
            rows_of = rel.table
            if rel.kind == "many_to_many" and rel.through is not None:
                need(rel.table, ())          # the link rows: their key and join columns
                rows_of = rel.through.table
            need(rows_of, shown)
            if rel.order_by:
                need(rows_of, (rel.order_by,))
            walk(rel.relations)

    walk(spec.relations)
    for e in join_edges(spec) if edges is None else edges:
        need(e.table, e.cols)
        need(e.parent, e.parent_cols)
    for table in spec.tables():
        need(table, keys.get(table, ()))
    return {t: None if cols is None else frozenset(cols) for t, cols in out.items()}


def merge_columns(into: dict[str, set[str] | None], table: str, cols: Iterable[str] | None) -> None:
    """Columns of `table` added to `into`; None (every column) wins over any list."""
    if table in into and into[table] is None:
        return
    if cols is None:
        into[table] = None
    else:
        into.setdefault(table, set()).update(cols)


def join_edges(spec: DocumentSpec) -> list[_Edge]:
    """Every join the spec makes, as an edge between one table's columns and another's."""
    return list(_edges(spec.root, spec.relations))


def _edges(parent: str, relations: Iterable[Relation]) -> Iterable[_Edge]:
    for rel in relations:
        here, there = rel.sides
        if rel.kind == "many_to_one":   # parent.here = table.there
            yield _Edge(rel.table, there, parent, here)
        else:                           # table.here = parent.there (the link table, for many_to_many)
            yield _Edge(rel.table, here, parent, there)
        if rel.kind == "many_to_many" and rel.through is not None:
            link_cols = tuple(c for c, _ in rel.through.join)
            far_cols = tuple(c for _, c in rel.through.join)
            yield _Edge(rel.through.table, far_cols, rel.table, link_cols)
        nested_parent = rel.through.table if rel.kind == "many_to_many" and rel.through else rel.table
        yield from _edges(nested_parent, rel.relations)


def _vals(values: dict[str, Any], cols: tuple[str, ...]) -> tuple:
    return tuple(map(values.get, cols))


def _project(values: dict[str, Any], columns: tuple[str, ...] | None,
             rename: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    out = dict(values) if columns is None else dict(zip(columns, map(values.get, columns)))
    if rename:
        names = dict(rename)
        out = {names.get(c, c): v for c, v in out.items()}
    return out


def sortable(values: tuple) -> tuple:
    """Values of mixed types (NULLs among them) in one total order."""
    if len(values) == 1:   # most keys and every order_by: without a generator (a document sorts each child)
        v = values[0]
        return ((True, type(v).__name__, v) if v is not None else _NULL_SORTS,)
    return tuple((True, type(v).__name__, v) if v is not None else _NULL_SORTS for v in values)


_NULL_SORTS = (False, "", 0)
