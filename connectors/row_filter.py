"""Row filters: which rows of a table a store holds (issue #39), as a small expression over the
row's columns, evaluated on the row as Debezium sends it (the live path, the bootstrap, the rebuild
and `verify` all hold that form before the documents' typing, so one evaluator serves them all).

The language (docs/shaping.md "Row filters"), SQL's spelling and SQL's three-valued logic: a row is kept
only when the predicate is true, so a comparison with NULL keeps nothing, as in a WHERE clause.

    predicate  := or
    or         := and ("or" and)*
    and        := not ("and" not)*
    not        := "not" not | "(" predicate ")" | test
    test       := column op value | column "is" ["not"] "null" | column "is" ["not"] ("true"|"false")
                | column ["not"] "in" "(" value ("," value)* ")" | column "starts" "with" string
                | column                                  (a boolean column)
    op         := "=" | "!=" | "<>" | "<" | "<=" | ">" | ">="
    value      := 'string' ('' inside for a quote) | number | true | false
    column     := name | "quoted name"

Values are typed by the column's Postgres type when the predicate is compiled (`compile_filter`),
so a mistake is refused before anything starts, naming the column: integers and numerics compare as
exact numbers (NaN equal to itself and above every number, as Postgres orders it), floats as
floats, dates and timestamps as instants (the literal in Postgres's spelling, '2024-01-01' or
'2024-01-01 10:00:00+02'), text by code point (as COLLATE "C", whatever the database's collation);
other types (enums, uuids, ...) take = / != / in / starts with against strings and the null tests.
Pure: no I/O.
"""
from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Callable, Mapping

Row = Mapping[str, Any]
Predicate = Callable[[Row], bool]


class FilterError(ValueError):
    """A predicate that does not parse or does not fit the table's columns; `column` names the
    column at fault when there is one."""

    def __init__(self, message: str, column: str | None = None):
        super().__init__(message)
        self.column = column


# --- parsing ---------------------------------------------------------------------------------------

_TOKEN = re.compile(r"""\s*(?:
    (?P<string>'(?:[^']|'')*')
  | (?P<number>-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
  | (?P<quoted>"(?:[^"]|"")+")
  | (?P<name>[A-Za-z_][A-Za-z0-9_$]*)
  | (?P<op><>|!=|<=|>=|=|<|>|\(|\)|,)
)""", re.X)
_WORDS = {"and", "or", "not", "in", "is", "null", "true", "false", "starts", "with"}


@dataclass(frozen=True)
class Column:
    name: str


@dataclass(frozen=True)
class Literal:
    value: Any          # str, int, Decimal (a number with a point or exponent), bool


@dataclass(frozen=True)
class Compare:
    column: Column
    op: str             # = != < <= > >=
    value: Literal


@dataclass(frozen=True)
class IsNull:
    column: Column
    negated: bool


@dataclass(frozen=True)
class IsBool:
    column: Column
    value: bool
    negated: bool


@dataclass(frozen=True)
class In:
    column: Column
    values: tuple[Literal, ...]
    negated: bool


@dataclass(frozen=True)
class StartsWith:
    column: Column
    prefix: Literal


@dataclass(frozen=True)
class Truth:
    column: Column      # a boolean column on its own


@dataclass(frozen=True)
class Not:
    arg: Any


@dataclass(frozen=True)
class And:
    args: tuple[Any, ...]


@dataclass(frozen=True)
class Or:
    args: tuple[Any, ...]


def _tokens(text: str) -> list[tuple[str, Any]]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise FilterError(f"cannot read {text[pos:pos + 20].strip()!r} (at character {pos + 1})")
        pos = m.end()
        kind = m.lastgroup
        raw = m.group(kind)
        if kind == "string":
            out.append(("string", raw[1:-1].replace("''", "'")))
        elif kind == "number":
            out.append(("number", Decimal(raw) if re.search(r"[.eE]", raw) else int(raw)))
        elif kind == "quoted":
            out.append(("name", raw[1:-1].replace('""', '"')))
        elif kind == "name" and raw.lower() in _WORDS:
            out.append(("word", raw.lower()))
        elif kind == "name":
            out.append(("name", raw.lower()))   # as in SQL: an unquoted name folds to lower case
        else:
            out.append(("op", raw))
    return out


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    def peek(self, kind: str, value: Any = None) -> bool:
        if self.i >= len(self.toks):
            return False
        k, v = self.toks[self.i]
        return k == kind and (value is None or v == value)

    def take(self, kind: str, value: Any = None, what: str | None = None) -> Any:
        if not self.peek(kind, value):
            got = repr(self.toks[self.i][1]) if self.i < len(self.toks) else "the end"
            raise FilterError(f"expected {what or value or kind}, found {got}")
        self.i += 1
        return self.toks[self.i - 1][1]

    def parse(self):
        if not self.toks:
            raise FilterError("the predicate is empty")
        node = self.or_()
        if self.i < len(self.toks):
            raise FilterError(f"unexpected {self.toks[self.i][1]!r} after a complete predicate")
        return node

    def or_(self):
        args = [self.and_()]
        while self.peek("word", "or"):
            self.i += 1
            args.append(self.and_())
        return args[0] if len(args) == 1 else Or(tuple(args))

    def and_(self):
        args = [self.not_()]
        while self.peek("word", "and"):
            self.i += 1
            args.append(self.not_())
        return args[0] if len(args) == 1 else And(tuple(args))

    def not_(self):
        if self.peek("word", "not"):
            self.i += 1
            return Not(self.not_())
        if self.peek("op", "("):
            self.i += 1
            node = self.or_()
            self.take("op", ")", "')'")
            return node
        return self.test()

    def value(self) -> Literal:
        if self.peek("string") or self.peek("number"):
            return Literal(self.take(self.toks[self.i][0]))
        if self.peek("word", "true") or self.peek("word", "false"):
            return Literal(self.take("word") == "true")
        if self.peek("word", "null"):
            raise FilterError("a comparison with null is never true: write 'is null' or 'is not null'")
        raise FilterError(f"expected a value (a 'string', a number, true or false), found "
                          f"{self.toks[self.i][1]!r}" if self.i < len(self.toks) else
                          "expected a value, found the end")

    def test(self):
        col = Column(self.take("name", what="a column name"))
        if self.peek("op") and self.toks[self.i][1] in ("=", "!=", "<>", "<", "<=", ">", ">="):
            op = self.take("op")
            return Compare(col, "!=" if op == "<>" else op, self.value())
        if self.peek("word", "is"):
            self.i += 1
            negated = self.peek("word", "not")
            if negated:
                self.i += 1
            if self.peek("word", "null"):
                self.i += 1
                return IsNull(col, negated)
            if self.peek("word", "true") or self.peek("word", "false"):
                return IsBool(col, self.take("word") == "true", negated)
            raise FilterError(f"expected null, true or false after 'is' ({col.name})", col.name)
        negated = self.peek("word", "not")
        if negated:
            self.i += 1
            if not self.peek("word", "in"):
                raise FilterError(f"expected 'in' after '{col.name} not'", col.name)
        if self.peek("word", "in"):
            self.i += 1
            self.take("op", "(", "'('")
            values = [self.value()]
            while self.peek("op", ","):
                self.i += 1
                values.append(self.value())
            self.take("op", ")", "')'")
            return In(col, tuple(values), negated)
        if self.peek("word", "starts"):
            self.i += 1
            self.take("word", "with", "'with'")
            prefix = self.value()
            if not isinstance(prefix.value, str):
                raise FilterError(f"'starts with' takes a 'string' ({col.name})", col.name)
            return StartsWith(col, prefix)
        return Truth(col)


def parse_filter(text: str):
    """The predicate's syntax tree; FilterError on a syntax mistake."""
    return _Parser(text).parse()


def columns_of(node) -> set[str]:
    """The columns a predicate reads."""
    if isinstance(node, (And, Or)):
        return set().union(*(columns_of(a) for a in node.args))
    if isinstance(node, Not):
        return columns_of(node.arg)
    return {node.column.name}


# --- values by type --------------------------------------------------------------------------------

def type_class(pg_type: str) -> str:
    """int, numeric, float, real, bool, text, bpchar, citext, uuid, date, timestamp (µs or ms by
    precision), timestamptz, json, array, label (a user-defined type: an enum when the catalog says
    so, `config check`) or other (compared only with the null tests), from format_type's spelling
    (connectors/postgres.column_types: a domain by its base type)."""
    t = pg_type.strip().lower()
    if t.endswith("[]"):
        return "array"
    if t in ("smallint", "integer", "bigint", "oid"):
        return "int"
    if re.fullmatch(r"numeric(\(\d+(,\s*-?\d+)?\))?|money", t):
        return "numeric"
    if t == "double precision":
        return "float"
    if t == "real":
        return "real"
    if t == "boolean":
        return "bool"
    if t in ("text", "name") or re.fullmatch(r"(character varying|varchar)(\(\d+\))?", t):
        return "text"
    if re.fullmatch(r"(character|bpchar|char)(\(\d+\))?", t):
        return "bpchar"
    if t == "citext":
        return "citext"
    if t == "uuid":
        return "uuid"
    if t == "date":
        return "date"
    if re.fullmatch(r"timestamp(\(\d\))?( without time zone)?", t):
        return "timestamp"
    if re.fullmatch(r"timestamp(\(\d\))? with time zone", t):
        return "timestamptz"
    if t in ("json", "jsonb", "hstore"):
        return "json"
    if t in _BUILTIN_OTHER or re.match(r"^(time|interval|bit|bit varying|character varying)\b", t):
        return "other"
    return "label"


# Built-in types whose wire form is not their text (time in µs, intervals, ...) or has no order
# worth offering: only the null tests apply to them.
_BUILTIN_OTHER = {"bytea", "inet", "cidr", "macaddr", "macaddr8", "xml", "tsvector", "tsquery", "point", "line",
                  "lseg", "box", "path", "polygon", "circle", "int4range", "int8range", "numrange", "tsrange",
                  "tstzrange", "daterange", "int4multirange", "int8multirange", "nummultirange", "tsmultirange",
                  "tstzmultirange", "datemultirange", "pg_lsn", "txid_snapshot", "pg_snapshot", "ltree", "geometry",
                  "geography", "oidvector", "regclass", "regtype", "jsonpath"}
_ORDERED = {"int", "numeric", "float", "real", "text", "bpchar", "date", "timestamp", "timestamptz"}
_EQUALITY = _ORDERED | {"citext", "uuid", "label", "bool"}


def _millis_precision(pg_type: str) -> bool:
    m = re.match(r"timestamp\((\d)\)", pg_type.strip().lower())
    return m is not None and int(m.group(1)) <= 3


_NUMERIC_NAMES = {"NAN": Decimal("NaN"), "POSITIVE_INFINITY": Decimal("Infinity"),
                  "NEGATIVE_INFINITY": Decimal("-Infinity")}


def _wire_key(cls: str, pg_type: str) -> Callable[[Any], Any]:
    """A wire value (Debezium's JSON form) to a comparable Python value. None, and a value of
    another JSON type than the column's (a record still in a column's old type, around an ALTER
    COLUMN TYPE: the schema watch re-reads those rows), are unknown (None)."""
    convert = _wire_converter(cls, pg_type)

    def key(v):
        if v is None:
            return None
        try:
            return convert(v)
        except (TypeError, ValueError, ArithmeticError, AttributeError):
            return None
    return key


def _wire_converter(cls: str, pg_type: str) -> Callable[[Any], Any]:
    from connectors.typed_values import DATE_INFINITY_SNAPSHOT, DATE_MAX_DAYS, DATE_MIN_DAYS

    def exact_int(v):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError
        return v

    if cls == "int":
        return exact_int
    if cls == "numeric":
        def numeric(v):
            if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                raise TypeError
            text = str(v).replace("$", "").replace(",", "")
            return _number(_NUMERIC_NAMES.get(text) or Decimal(text))
        return numeric
    if cls in ("float", "real"):
        def flt(v):
            if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                raise TypeError
            x = float(v)   # Kafka's JsonConverter writes 'NaN' and '±Infinity' as strings
            if cls == "real" and math.isfinite(x):
                x = struct.unpack("f", struct.pack("f", x))[0]   # a real's own value, as Postgres widens it
            return _number(x)
        return flt
    if cls == "bool":
        def boolean(v):
            if not isinstance(v, bool):
                raise TypeError
            return v
        return boolean
    if cls == "date":
        def days(v):
            v = exact_int(v)
            if v > DATE_MAX_DAYS:
                return math.inf
            if v < DATE_MIN_DAYS:   # the snapshot's int overflows (typed_values._date)
                return math.inf if abs(v - DATE_INFINITY_SNAPSHOT) <= 2 else -math.inf
            return v
        return days
    if cls == "timestamp":
        per = 1000 if _millis_precision(pg_type) else 1

        def stamp(v):
            v = exact_int(v)
            if abs(v) >= (1 << 63) - 1 or (per == 1000 and abs(v) > 10 ** 18):   # typed_values._timestamp
                return math.inf if v > 0 else -math.inf
            return v * per
        return stamp
    if cls == "timestamptz":
        def instant(v):
            if not isinstance(v, str):
                raise TypeError
            return _instant(v)
        return instant
    if cls in ("text", "label", "bpchar", "citext", "uuid"):
        # char(n) compares without its padding; citext and uuid without case.
        fold = {"bpchar": lambda v: v.rstrip(" "), "citext": str.lower, "uuid": str.lower}.get(cls, lambda v: v)

        def text(v):
            if not isinstance(v, str):
                raise TypeError
            return fold(v)
        return text
    return lambda v: v


def _number(x) -> tuple[int, Any]:
    """A number as Postgres orders it: NaN equal to itself and above every other value."""
    nan = x.is_nan() if isinstance(x, Decimal) else math.isnan(x)
    return (1, 0) if nan else (0, x)


def _instant(text: str) -> float | int:
    """A timestamptz as µs since 1970 in UTC (infinity as ±inf), from Debezium's ISO-8601
    ('2024-01-01T10:00:00.5Z', '-0043-03-15T10:00:00Z': astronomical years) or Postgres's spelling
    ('2024-01-01 12:00:00+02', '0044-03-15 10:00:00+00 BC')."""
    from connectors.debezium_values import Infinite, timestamp_micros

    t = text.strip()
    m = re.match(r"^([+-])?(\d+)(-\d\d-\d\d)T(.*)$", t)
    if m:   # ISO-8601: to Postgres's spelling, the era named
        sign, year, rest, clock = m.groups()
        clock = clock.replace("Z", "+00")
        astronomical = -int(year) if sign == "-" else int(year)
        t = (f"{astronomical:04d}{rest} {clock}" if astronomical > 0 else
             f"{1 - astronomical:04d}{rest} {clock} BC")   # year 0 is 1 BC
    out = timestamp_micros(_with_seconds(t))
    if isinstance(out, Infinite):
        return math.inf if out.positive else -math.inf
    return int(out)


def _with_seconds(text: str) -> str:
    """'2024-01-01' and '2024-01-01 10:00' as Postgres's full spelling."""
    if re.fullmatch(r"\d+-\d\d-\d\d( BC)?", text):
        return re.sub(r"^(\d+-\d\d-\d\d)", r"\1 00:00:00", text)
    return re.sub(r"^(\d+-\d\d-\d\d \d\d:\d\d)(?!:)", r"\1:00", text)


def _literal_key(cls: str, pg_type: str, lit: Literal, column: str) -> Any:
    """The literal as the comparable value of the column's class; FilterError when it is not one."""
    from connectors.debezium_values import Infinite, date_days, timestamp_micros

    v = lit.value
    try:
        if cls == "int":
            if isinstance(v, bool) or not isinstance(v, (int, Decimal)):
                raise ValueError
            return v
        if cls == "numeric":
            if isinstance(v, bool) or not isinstance(v, (int, Decimal)):
                raise ValueError
            return _number(Decimal(v))
        if cls in ("float", "real"):
            if isinstance(v, bool) or not isinstance(v, (int, Decimal)):
                raise ValueError
            return _number(float(v))
        if cls == "bool":
            if not isinstance(v, bool):
                raise ValueError
            return v
        if cls == "date":
            days = date_days(str(v)) if isinstance(v, str) and _valid_day(v) else None
            if days is None:
                raise ValueError
            return (math.inf if days.positive else -math.inf) if isinstance(days, Infinite) else days
        if cls == "timestamp":
            if not isinstance(v, str):
                raise ValueError
            text = _with_seconds(v)
            if not _valid_day(text):
                raise ValueError
            if re.search(r"\d[+-]\d\d(:?\d\d)?( BC)?$", text) or "T" in text:
                raise ValueError   # a timestamp without time zone compares with a zone-less literal
            us = timestamp_micros(text)
            return (math.inf if us.positive else -math.inf) if isinstance(us, Infinite) else int(us)
        if cls == "timestamptz":
            # With its zone: Postgres would read a zone-less literal in the session's TimeZone.
            if not isinstance(v, str) or not _valid_day(v) or not (
                    v.strip() in ("infinity", "-infinity") or re.search(r"\d(Z|[+-]\d\d(:?\d\d)?)( BC)?$", v.strip())):
                raise ValueError
            return _instant(v)
        if cls in ("text", "label"):
            if not isinstance(v, str):
                raise ValueError
            return v
        if cls == "bpchar":
            if not isinstance(v, str):
                raise ValueError
            return v.rstrip(" ")
        if cls == "citext":
            if not isinstance(v, str):
                raise ValueError
            return v.lower()
        if cls == "uuid":
            import uuid

            if not isinstance(v, str):
                raise ValueError
            return str(uuid.UUID(v))
    except (ValueError, TypeError, AttributeError, InvalidOperation):
        pass
    raise FilterError(f"{column} is {pg_type}: {_show(v)} is not a value of it{_hint(cls)}", column)


def _valid_day(text: str) -> bool:
    """The literal's calendar day exists (the text parsers take 2024-13-01 as a day number)."""
    m = re.match(r"^\+?(\d+)-(\d\d)-(\d\d)", text.strip())
    if m is None:
        return text.strip() in ("infinity", "-infinity")
    year, month, day = (int(g) for g in m.groups())
    if text.strip().endswith(" BC"):
        year = 1 - year
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    last = [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    return 1 <= month <= 12 and 1 <= day <= last[month - 1]


def _show(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return f"'{v}'" if isinstance(v, str) else str(v)


def _hint(cls: str) -> str:
    return {"date": " (write 'YYYY-MM-DD')",
            "timestamp": " (write 'YYYY-MM-DD HH:MM:SS', without a zone)",
            "timestamptz": " (write 'YYYY-MM-DD HH:MM:SS+00', with its zone)",
            "uuid": " (write a 'uuid')",
            "bool": " (write true or false)",
            "int": " (write a number)", "numeric": " (write a number)", "float": " (write a number)",
            "real": " (write a number)", "text": " (write a 'string')", "bpchar": " (write a 'string')",
            "citext": " (write a 'string')", "label": " (write a 'string')"}.get(cls, "")


# --- compiling -------------------------------------------------------------------------------------

_OPS = {"=": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}
Tri = Callable[[Row], "bool | None"]   # SQL's three values: True, False, None (unknown)


def compile_filter(text: str, types: Mapping[str, str]) -> Predicate:
    """The predicate over wire rows, checked against the table's columns (name -> format_type).
    A row is kept only when the predicate is true."""
    tri = _compile(parse_filter(text), types)
    return lambda row: tri(row) is True


def _column(col: Column, types: Mapping[str, str]) -> tuple[str, str]:
    if col.name not in types:
        near = [c for c in types if c.lower() == col.name.lower()]
        hint = f' (did you mean "{near[0]}"? a name with capitals is quoted, as in SQL)' if near else ""
        raise FilterError(f"no column {col.name!r}{hint}", col.name)
    return types[col.name], type_class(types[col.name])


def _compile(node, types: Mapping[str, str]) -> Tri:
    if isinstance(node, And):
        parts = [_compile(a, types) for a in node.args]

        def and_(row):
            out: bool | None = True
            for p in parts:
                v = p(row)
                if v is False:
                    return False
                if v is None:
                    out = None
            return out
        return and_
    if isinstance(node, Or):
        parts = [_compile(a, types) for a in node.args]

        def or_(row):
            out: bool | None = False
            for p in parts:
                v = p(row)
                if v is True:
                    return True
                if v is None:
                    out = None
            return out
        return or_
    if isinstance(node, Not):
        inner = _compile(node.arg, types)

        def not_(row):
            v = inner(row)
            return None if v is None else not v
        return not_
    name = node.column.name
    pg_type, cls = _column(node.column, types)
    key = _wire_key(cls, pg_type)
    if isinstance(node, IsNull):
        return (lambda row: row.get(name) is not None) if node.negated else (lambda row: row.get(name) is None)
    if isinstance(node, (IsBool, Truth)):
        if cls != "bool":
            raise FilterError(f"{name} is {pg_type}, not boolean: compare it with a value", name)
        if isinstance(node, Truth):
            return lambda row: key(row.get(name))
        want, negated = node.value, node.negated

        def is_bool(row):   # IS [NOT] TRUE/FALSE: never unknown
            v = key(row.get(name))
            return (v is want) != negated
        return is_bool
    if cls not in _EQUALITY:
        raise FilterError(f"{name} is {pg_type}: only 'is null' and 'is not null' apply to it", name)
    if isinstance(node, Compare):
        if node.op not in ("=", "!=") and cls not in _ORDERED:
            raise FilterError(f"{name} is {pg_type}: it has no order here, use = != or in", name)
        want = _literal_key(cls, pg_type, node.value, name)
        op = _OPS[node.op]

        def compare(row):
            v = key(row.get(name))
            return None if v is None else op(v, want)
        return compare
    if isinstance(node, In):
        wanted = {_literal_key(cls, pg_type, v, name) for v in node.values}
        negated = node.negated

        def in_(row):
            v = key(row.get(name))
            return None if v is None else (v in wanted) != negated
        return in_
    if isinstance(node, StartsWith):
        if cls not in ("text", "bpchar", "label"):
            raise FilterError(f"{name} is {pg_type}: 'starts with' applies to text", name)
        prefix = node.prefix.value

        def starts(row):
            v = key(row.get(name))
            return None if v is None else v.startswith(prefix)
        return starts
    raise FilterError(f"cannot compile {node!r}")   # pragma: no cover - every node is handled above


def soft_delete_node(column: str, value: Any, types: Mapping[str, str]):
    """The rows a soft delete keeps: unmarked ones. With no value, a boolean column marks a row by
    true and any other column by holding a value (deleted_at); with one, by holding that value."""
    col = Column(column)
    if value is None:
        if column in types and type_class(types[column]) == "bool":
            return IsBool(col, True, negated=True)
        return IsNull(col, negated=False)
    lit = Literal(Decimal(str(value)) if isinstance(value, float) else value)
    return Or((IsNull(col, negated=False), Compare(col, "!=", lit)))


def store_predicate(where: str | None, soft_delete: tuple[str, Any] | None,
                    types: Mapping[str, str]) -> Predicate | None:
    """One store's filter of a table: its `where` and its soft delete, both true; None: every row."""
    nodes = []
    if where is not None:
        nodes.append(parse_filter(where))
    if soft_delete is not None:
        nodes.append(soft_delete_node(soft_delete[0], soft_delete[1], types))
    if not nodes:
        return None
    tri = _compile(nodes[0] if len(nodes) == 1 else And(tuple(nodes)), types)
    return lambda row: tri(row) is True


def literals_by_column(where: str | None) -> dict[str, set[Any]]:
    """The literals each column is compared with (`config check` holds an enum's to its labels)."""
    out: dict[str, set[Any]] = {}

    def walk(node):
        if isinstance(node, (And, Or)):
            for a in node.args:
                walk(a)
        elif isinstance(node, Not):
            walk(node.arg)
        elif isinstance(node, Compare):
            out.setdefault(node.column.name, set()).add(node.value.value)
        elif isinstance(node, In):
            out.setdefault(node.column.name, set()).update(v.value for v in node.values)
        elif isinstance(node, StartsWith):
            out.setdefault(node.column.name, set())
    if where is not None:
        walk(parse_filter(where))
    return out


def predicate_columns(where: str | None, soft_delete: tuple[str, Any] | None) -> set[str]:
    out = columns_of(parse_filter(where)) if where is not None else set()
    return out | ({soft_delete[0]} if soft_delete is not None else set())


def _sql_literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, Decimal)):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


def _sql_name(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def node_sql(node, types: Mapping[str, str]) -> str:
    """The predicate as a Postgres WHERE clause that keeps the same rows (the integration test
    holds the two to the same answer on random rows): for counting them (`status`)."""
    if isinstance(node, (And, Or)):
        joiner = " AND " if isinstance(node, And) else " OR "
        return "(" + joiner.join(node_sql(a, types) for a in node.args) + ")"
    if isinstance(node, Not):
        return f"(NOT {node_sql(node.arg, types)})"
    col = _sql_name(node.column.name)
    pg_type = types.get(node.column.name, "").strip().lower()
    if pg_type == "money":
        col = f"{col}::numeric"   # money has no operators with a number
    elif pg_type == "real":
        col = f"{col}::float8"    # as the filter compares it (an IN list would cast its values to real)
    if isinstance(node, Compare):
        # Text is ordered by code point here, whatever the database's collation.
        ordered_text = node.op not in ("=", "!=") and type_class(types.get(node.column.name, "")) in ("text", "bpchar")
        collate = ' COLLATE "C"' if ordered_text else ""
        return f"({col}{collate} {'<>' if node.op == '!=' else node.op} {_sql_literal(node.value.value)})"
    if isinstance(node, IsNull):
        return f"({col} IS {'NOT ' if node.negated else ''}NULL)"
    if isinstance(node, IsBool):
        return f"({col} IS {'NOT ' if node.negated else ''}{'TRUE' if node.value else 'FALSE'})"
    if isinstance(node, In):
        return f"({col} {'NOT ' if node.negated else ''}IN ({', '.join(_sql_literal(v.value) for v in node.values)}))"
    if isinstance(node, StartsWith):
        return f"starts_with({col}::text, {_sql_literal(node.prefix.value)})"
    if isinstance(node, Truth):
        return f"({col})"
    raise FilterError(f"no SQL for {node!r}")   # pragma: no cover


def store_sql(where: str | None, soft_delete: tuple[str, Any] | None, types: Mapping[str, str]) -> str | None:
    """One store's filter as a WHERE clause; None: every row."""
    nodes = ([parse_filter(where)] if where is not None else []) + (
        [soft_delete_node(soft_delete[0], soft_delete[1], types)] if soft_delete is not None else [])
    if not nodes:
        return None
    return node_sql(nodes[0] if len(nodes) == 1 else And(tuple(nodes)), types)
