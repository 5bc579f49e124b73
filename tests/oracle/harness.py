"""Oracle harness: drive ivm with random CDC epochs and check every epoch against DuckDB.

A ``Harness`` owns two databases:

* the system under test, ``ivm.connect()``, with the tables and maintained views;
* the oracle, a separate plain ``duckdb.connect()`` holding the same tables
  without constraints, which the harness updates itself from each epoch's
  changes (insert rows; delete exactly n copies of a row by ``rowid``, NULL-safe).

After every epoch it checks

a. each view: ``db.read(view)`` equals DuckDB running the view's SQL over the
   oracle's tables, as a multiset; columns are compared by position, and their
   names and Arrow types must equal DuckDB's for the same view (``CREATE VIEW``
   in the oracle: the query's names, duplicates renamed ``k_1``). *Which rows*
   are compared exactly: every value that is not a float (Decimals included)
   must be equal, and each row's copies counted, so a float aggregate feeding a
   comparison, a CAST, a key, DISTINCT or a LIMIT must give DuckDB's rows. Only
   float *values* in output columns match within a relative tolerance
   (``FLOAT_TOLERANCE``), because DuckDB's own answer varies with the order it
   reads rows in: its SUM/AVG over DOUBLE add rows one by one without
   compensation ({0.1, 0.2, 0.3}: 0.6000000000000001 or 0.6 by order), and
   VAR/STDDEV, windowed sums, SUM(DISTINCT …) follow the order too; ivm's
   documented answers (a float SUM/AVG is the exact sum rounded once) are one of
   DuckDB's. ``exact_floats=True`` compares float values exactly as well, for
   data where DuckDB's answer does not depend on the order (groups of at most two
   values, or values whose sums are all exact);
b. the deltas ``ingest`` returned: one per view, consolidated (each distinct
   row once, no zero weights), and the sum of all of them since the view was
   created, added to its initial contents, equals ``db.read(view)``;
c. ``db.epoch`` advanced by exactly one; every base table reads as the oracle's;
d. the second oracle: the view's logical plan rendered as one ordinary query
   (``db.plain_sql(view)``, no incrementality) gives DuckDB's answer too, so a
   planner bug shows apart from an incremental one.

Where DuckDB's own answer is left to chance (MODE, ARG_MIN/ARG_MAX ties, ties
inside an ordered LIST), ``oracle=`` gives, per view, the SQL of ivm's
documented deterministic answer; the oracle computes that instead.

Epochs are drawn by a hypothesis strategy from the tables' *current* contents:
inserts (duplicates in tables without a key, NULL in every nullable column),
deletes of rows that are there (one of several copies, too), updates, empty
batches, several tables in one atomic epoch, and "delete everything". Each
table's change is sent in one of the four batch formats of API.md: a list of
dicts, an Arrow table with ``__w`` (weights split into ±1/±2), a Debezium
envelope, or a Delta change data feed. LIST and STRUCT columns need ``domains=``,
their values given frozen (``freeze``: tuples, and tuples of (field, value) pairs), so
that rows stay hashable; batches thaw them (``thaw``).

Typical use, inside a hypothesis test::

    @settings(max_examples=3, deadline=None, derandomize=True)
    @given(data=st.data())
    def test_revenue(data):
        run_workload(DDL, {"revenue": "SELECT ..."}, data, epochs=20)

or scripted, with the same checks after every epoch::

    harness = Harness(DDL)
    harness.create_views({"revenue": "SELECT ..."})
    harness.apply(Epoch.of({"orders": [("insert", row), ("update", old, new)]}, fmt="debezium"))

``connect=`` replaces ``ivm.connect`` (a persistent path, another mode), and
``reopen()`` / ``run_workload(reopen_every=n)`` close and reopen the session
between epochs to check that state survives.
"""

from __future__ import annotations

import datetime
import itertools
import math
import os
import random
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa
from hypothesis import assume
from hypothesis import strategies as st

import ivm
from oracle.settings import shortened

WEIGHT = "__w"

Row = tuple[Any, ...]
Op = tuple[Any, ...]
"""``("insert", row)``, ``("delete", row)`` or ``("update", old_row, new_row)``."""

FORMATS = ("rows", "weighted", "debezium", "delta")
"""Batch formats (API.md, Batches): list of dicts, Arrow + ``__w``, Debezium, Delta CDF."""

# --- tables ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ColumnSpec:
    name: str
    type: str
    """DuckDB's spelling of the type (``DECIMAL(12,2)``, ``VARCHAR``…)."""
    nullable: bool


@dataclass(frozen=True)
class TableSpec:
    name: str
    columns: tuple[ColumnSpec, ...]
    primary_key: tuple[str, ...]

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def key(self, row: Row) -> Row | None:
        """The row's primary key values (None for a table without a key)."""
        if not self.primary_key:
            return None
        return tuple(row[self.names.index(k)] for k in self.primary_key)

    def plain_ddl(self) -> str:
        """CREATE TABLE without constraints, for the oracle."""
        columns = ", ".join(f"{quote(c.name)} {c.type}" for c in self.columns)
        return f"CREATE TABLE {quote(self.name)} ({columns})"


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def table_specs(statements: Sequence[str]) -> dict[str, TableSpec]:
    """Columns, types, nullability and primary keys of CREATE TABLE statements, in order.

    DuckDB parses the DDL (in a scratch database), so the spelling of the types is
    DuckDB's and constraints are read from its catalog rather than from the text.
    """
    scratch = duckdb.connect()
    try:
        for statement in statements:
            scratch.execute(statement)
        tables = [r[0] for r in scratch.execute(
            "SELECT table_name FROM duckdb_tables() ORDER BY table_oid").fetchall()]
        keys = dict(scratch.execute(
            "SELECT table_name, constraint_column_names FROM duckdb_constraints() "
            "WHERE constraint_type = 'PRIMARY KEY'").fetchall())
        specs = {}
        for table in tables:
            columns = scratch.execute(
                "SELECT column_name, data_type, is_nullable FROM duckdb_columns() "
                "WHERE table_name = ? ORDER BY column_index", [table]).fetchall()
            key = tuple(keys.get(table) or ())
            specs[table] = TableSpec(
                table,
                tuple(ColumnSpec(n, t, bool(nullable) and n not in key)
                      for n, t, nullable in columns),
                key,
            )
        return specs
    finally:
        scratch.close()


# --- value domains -----------------------------------------------------------------------

STRINGS = ("a", "b", "c", "A", "")
"""Few strings, so joins and groups collide; "A" meets upper('a'), "" is the empty edge."""

INTEGERS = tuple(range(6))
KEY_INTEGERS = tuple(range(16))
DECIMALS = ("0", "1.5", "2.25", "-3.1", "10", "0.01", "99.99")
DOUBLES = (0.0, 0.5, 1.5, -2.25, 0.1, 0.3, 100.0)
TIMESTAMPS = (
    datetime.datetime(2024, 1, 1, 0, 0),
    datetime.datetime(2024, 1, 1, 13, 45, 10),
    datetime.datetime(2024, 2, 29, 23, 59, 59),
    datetime.datetime(2023, 12, 31, 8, 0),
    datetime.datetime(2024, 3, 10, 12, 30),
)
DATES = tuple(ts.date() for ts in TIMESTAMPS)

_INTEGER_TYPES = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT",
                  "USMALLINT", "UINTEGER", "UBIGINT"}
_DECIMAL = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")


def default_domain(column: ColumnSpec, is_key: bool) -> tuple[Any, ...]:
    """A small set of values for a column of this type (NULL is added separately)."""
    kind = column.type.upper()
    if kind in _INTEGER_TYPES:
        return KEY_INTEGERS if is_key else INTEGERS
    if match := _DECIMAL.fullmatch(kind):
        scale = int(match.group(2))
        quantum = Decimal(1).scaleb(-scale)
        return tuple(dict.fromkeys(Decimal(d).quantize(quantum) for d in DECIMALS))
    if kind in ("DOUBLE", "FLOAT", "REAL"):
        return DOUBLES
    if kind == "VARCHAR":
        return STRINGS
    if kind == "TIMESTAMP":
        return TIMESTAMPS
    if kind == "DATE":
        return DATES
    if kind == "BOOLEAN":
        return (False, True)
    raise ValueError(f"no default value domain for {column.name} {column.type}: pass domains=")


# --- epochs ------------------------------------------------------------------------------


def op_events(ops: Iterable[Op]) -> Iterator[tuple[Row, int]]:
    """Each op as (row, ±1) events, an update's delete first."""
    for op in ops:
        if op[0] == "insert":
            yield op[1], 1
        elif op[0] == "delete":
            yield op[1], -1
        else:
            yield op[1], -1
            yield op[2], 1


def net_change(ops: Iterable[Op]) -> Counter[Row]:
    """The consolidated change: row -> weight, zero weights dropped."""
    net: Counter[Row] = Counter()
    for row, w in op_events(ops):
        net[row] += w
    return Counter({row: w for row, w in net.items() if w != 0})


@dataclass(frozen=True)
class TableChange:
    """One table's change in an epoch: ops, the batch format, and a seed for the rendering
    choices (weight splits, row and column order, cancelling pairs)."""

    table: str
    ops: tuple[Op, ...]
    fmt: str = "weighted"
    variant: int = 0

    def __repr__(self) -> str:
        lines = [f"{self.table} as {self.fmt}#{self.variant}:"]
        for op in self.ops:
            if op[0] == "update":
                lines.append(f"    update {op[1]!r} -> {op[2]!r}")
            else:
                lines.append(f"    {op[0]} {op[1]!r}")
        if not self.ops:
            lines.append("    (empty batch)")
        return "\n".join(lines)

    def render(self, spec: TableSpec, schema: pa.Schema) -> Any:
        """The batch handed to ``ingest``."""
        return _RENDERERS[self.fmt](self, spec, schema, random.Random(self.variant))


@dataclass(frozen=True)
class Epoch:
    """One ``ingest`` call. ``single``: use the ``ingest(table, batch)`` form."""

    changes: tuple[TableChange, ...]
    single: bool = False

    @classmethod
    def of(cls, ops: Mapping[str, Sequence[Op]], fmt: str = "weighted",
           variant: int = 0) -> Epoch:
        """An explicit epoch, for scripted tests."""
        return cls(tuple(TableChange(t, tuple(o), fmt, variant) for t, o in ops.items()))

    def __repr__(self) -> str:
        form = "ingest(table, batch)" if self.single else "ingest({table: batch, ...})"
        return "\n".join([f"Epoch via {form}", *(repr(c) for c in self.changes)])

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        # hypothesis prints draws with its pretty printer: show the compact form.
        printer.text(repr(self))


def _dicts(spec: TableSpec, rows: Iterable[Row], schema: pa.Schema | None = None
           ) -> list[dict[str, Any]]:
    """Rows as dicts; with ``schema``, LIST and STRUCT values thawed (``thaw``)."""
    if schema is None:
        return [dict(zip(spec.names, row, strict=True)) for row in rows]
    types = [schema.field(n).type for n in spec.names]
    return [{n: thaw(v, t) for n, v, t in zip(spec.names, row, types, strict=True)}
            for row in rows]


def thaw(value: Any, type_: pa.DataType) -> Any:
    """The Python value Arrow reads for ``type_`` from a frozen one (``freeze``): LIST
    values from tuples, STRUCT values from tuples of (field, value) pairs. Domains of
    LIST and STRUCT columns are given frozen, so that rows stay hashable."""
    if value is None:
        return None
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        return [thaw(v, type_.value_type) for v in value]
    if pa.types.is_struct(type_):
        fields = {type_.field(i).name: type_.field(i).type for i in range(type_.num_fields)}
        return {k: thaw(v, fields[k]) for k, v in value}
    return value


def _shuffled_columns(table: pa.Table, rng: random.Random) -> pa.Table:
    names = list(table.column_names)
    rng.shuffle(names)
    return table.select(names)


def _render_rows(change: TableChange, spec: TableSpec, schema: pa.Schema,
                 rng: random.Random) -> Any:
    if all(op[0] == "insert" for op in change.ops):
        return _dicts(spec, (op[1] for op in change.ops), schema)
    events = list(op_events(change.ops))
    return [dict(d, **{WEIGHT: w})
            for d, (_, w) in zip(_dicts(spec, (r for r, _ in events), schema), events,
                                 strict=True)]


def _split(weight: int, rng: random.Random) -> list[int]:
    """``weight`` as parts of magnitude 1 or 2 with its sign."""
    parts, left = [], abs(weight)
    while left:
        part = rng.choice((1, 2)) if left >= 2 else 1
        parts.append(part if weight > 0 else -part)
        left -= part
    return parts


def _render_weighted(change: TableChange, spec: TableSpec, schema: pa.Schema,
                     rng: random.Random) -> pa.Table:
    rows: list[tuple[Row, int]] = []
    for row, weight in net_change(change.ops).items():
        rows.extend((row, part) for part in _split(weight, rng))
    touched = [r for r, _ in op_events(change.ops)]
    if touched and rng.random() < 0.3:
        noise = rng.choice(touched)  # an insert and a delete of one row: cancels out
        rows += [(noise, 1), (noise, -1)]
    rng.shuffle(rows)
    weight_type = rng.choice((pa.int64(), pa.int32()))
    full = schema.append(pa.field(WEIGHT, weight_type))
    data = [dict(d, **{WEIGHT: w})
            for d, (_, w) in zip(_dicts(spec, (r for r, _ in rows), schema), rows, strict=True)]
    return _shuffled_columns(pa.Table.from_pylist(data, schema=full), rng)


def _render_debezium(change: TableChange, spec: TableSpec, schema: pa.Schema,
                     rng: random.Random) -> pa.Table:
    fields = list(schema)
    rng.shuffle(fields)
    struct = pa.struct(fields)
    ops, before, after = [], [], []
    for op in change.ops:
        old = _dicts(spec, [op[1]], schema)[0]
        if op[0] == "insert":
            ops.append(rng.choice(("c", "r")))
            before.append(None)
            after.append(old)
        elif op[0] == "delete":
            ops.append("d")
            before.append(old)
            after.append(None)
        else:
            ops.append("u")
            before.append(old)
            after.append(_dicts(spec, [op[2]], schema)[0])
    table = pa.table({
        "op": pa.array(ops, pa.string()),
        "before": pa.array(before, struct),
        "after": pa.array(after, struct),
        "ts_ms": pa.array(range(len(ops)), pa.int64()),
    })
    return _shuffled_columns(table, rng)


def _render_delta(change: TableChange, spec: TableSpec, schema: pa.Schema,
                  rng: random.Random) -> pa.Table:
    rows, kinds = [], []
    for op in change.ops:
        if op[0] == "insert":
            rows.append(op[1])
            kinds.append("insert")
        elif op[0] == "delete":
            rows.append(op[1])
            kinds.append("delete")
        else:
            rows += [op[1], op[2]]
            kinds += ["update_preimage", "update_postimage"]
    table = pa.Table.from_pylist(_dicts(spec, rows, schema), schema=schema)
    table = table.append_column("_change_type", pa.array(kinds, pa.string()))
    table = table.append_column("_commit_version", pa.array([7] * len(rows), pa.int64()))
    return _shuffled_columns(table, rng)


_RENDERERS = {
    "rows": _render_rows,
    "weighted": _render_weighted,
    "debezium": _render_debezium,
    "delta": _render_delta,
}

# --- the epoch strategy ------------------------------------------------------------------

MODES = ("one", "one", "one", "one", "several", "several", "empty", "clear")
"""How an epoch is shaped: mostly one table; sometimes several tables at once, an
empty batch, or a table emptied (and maybe refilled). ``"all"`` (in no default) changes
every table, one in four of them emptied first (and maybe refilled): for a session of many
views over many tables (a fused Spark-mode test), where an epoch of one table would leave
most views unchanged."""

FUSED_MODES = ("all",)
"""Epoch shapes for a session of many views over many tables (a Spark epoch costs seconds:
each should change every view)."""


def _draw_row(draw: Any, spec: TableSpec, domains: Mapping[str, Sequence[Any]],
              key: Row | None) -> Row:
    """A new row; its key columns are ``key`` when given."""
    values = []
    for column in spec.columns:
        if key is not None and column.name in spec.primary_key:
            values.append(key[spec.primary_key.index(column.name)])
            continue
        choices = list(domains[column.name]) + ([None] if column.nullable else [])
        values.append(draw(st.sampled_from(choices)))
    return tuple(values)


def _draw_ops(draw: Any, spec: TableSpec, live: list[Row],
              domains: Mapping[str, Sequence[Any]], clear: bool, max_ops: int) -> list[Op]:
    """Valid ops against ``live`` (the table's rows, modified in place)."""
    ops: list[Op] = []
    if clear:
        ops += [("delete", row) for row in live]
        live.clear()
        if not draw(st.booleans()):
            return ops
    key_space = [tuple(k) for k in itertools.product(*(domains[k] for k in spec.primary_key))]
    keys = Counter(spec.key(r) for r in live)
    for _ in range(draw(st.integers(1, max_ops))):
        kinds = ["insert", "insert"]
        if live:
            kinds += ["delete", "update"] + ([] if spec.primary_key else ["duplicate"])
        kind = draw(st.sampled_from(kinds))
        if kind == "insert":
            key = None
            if spec.primary_key:
                free = [k for k in key_space if not keys[k]]
                if not free:
                    continue
                key = draw(st.sampled_from(free))
            row = _draw_row(draw, spec, domains, key)
            ops.append(("insert", row))
        elif kind == "duplicate":
            row = live[draw(st.integers(0, len(live) - 1))]
            ops.append(("insert", row))
        else:
            old = live.pop(draw(st.integers(0, len(live) - 1)))
            keys[spec.key(old)] -= 1
            if kind == "delete":
                ops.append(("delete", old))
                continue
            row = _draw_row(draw, spec, domains, spec.key(old))
            ops.append(("update", old, row))
        live.append(row)
        keys[spec.key(row)] += 1
    return ops


@st.composite
def epoch_strategy(
    draw: Any,
    specs: Mapping[str, TableSpec],
    contents: Mapping[str, Sequence[Row]],
    domains: Mapping[str, Mapping[str, Sequence[Any]]],
    max_ops: int = 6,
    modes: Sequence[str] = MODES,
) -> Epoch:
    """One epoch's changes, valid against ``contents`` (table -> current rows)."""
    names = list(specs)
    mode = draw(st.sampled_from(modes))
    if mode == "all":
        chosen = names
    elif mode == "several" and len(names) > 1:
        chosen = draw(st.lists(st.sampled_from(names), min_size=2, max_size=len(names),
                               unique=True))
    else:
        chosen = [draw(st.sampled_from(names))]
    changes = []
    for name in chosen:
        clear = mode == "clear" or (mode == "all" and draw(st.integers(0, 3)) == 0)
        ops = [] if mode == "empty" else _draw_ops(
            draw, specs[name], list(contents[name]), domains[name], clear, max_ops)
        fmt = draw(st.sampled_from(FORMATS))
        changes.append(TableChange(name, tuple(ops), fmt, draw(st.integers(0, 999))))
    single = len(changes) == 1 and draw(st.booleans())
    return Epoch(tuple(changes), single)


# --- comparing multisets -----------------------------------------------------------------

_FLOAT = object()
NAN = float("nan")
"""The one NaN rows hold after ``freeze``: NaN != NaN, but a Counter finds a key by identity."""


def freeze(value: Any) -> Any:
    """A hashable form of a value from ``to_pylist`` (lists and structs become tuples,
    every NaN the same object, so equal rows compare equal)."""
    if isinstance(value, float) and math.isnan(value):
        return NAN
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, freeze(v)) for k, v in value.items())
    return value


def rows_of(table: pa.Table) -> list[Row]:
    """The table's rows as tuples, by position (a query's column names may repeat)."""
    columns = [column.to_pylist() for column in table.columns]
    return [tuple(freeze(v) for v in row) for row in zip(*columns, strict=True)]


def sort_rows(rows: Iterable[Row]) -> list[Row]:
    """Rows in a stable order, NULLs last in each column."""
    rows = list(rows)
    try:
        return sorted(rows, key=lambda r: tuple((1, 0) if v is None else (0, v) for v in r))
    except TypeError:
        return sorted(rows, key=repr)


def _exact_part(row: Row) -> Row:
    return tuple(_FLOAT if isinstance(v, float) else v for v in row)


def _close(a: float, b: float, rel_tol: float, abs_tol: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)


def multiset_mismatch(expected: Iterable[Row], actual: Iterable[Row], rel_tol: float,
                      abs_tol: float) -> tuple[list[Row], list[Row]]:
    """(rows of ``expected`` not in ``actual``, rows of ``actual`` not in ``expected``).

    Multisets: each copy counts. Floats match within the tolerances (NaN matches
    NaN), other values exactly (Decimal('1.50') == Decimal('1.5'): the column
    types, checked apart, hold the scale).
    """
    buckets: dict[Row, list[Row]] = defaultdict(list)
    for row in actual:
        buckets[_exact_part(row)].append(row)
    missing = []
    for row in expected:
        bucket = buckets.get(_exact_part(row), [])
        match = next((i for i, other in enumerate(bucket) if all(
            _close(a, b, rel_tol, abs_tol)
            for a, b in zip(row, other, strict=True) if isinstance(a, float)
        )), None)
        if match is None:
            missing.append(row)
        else:
            bucket.pop(match)
    extra = [row for bucket in buckets.values() for row in bucket]
    return missing, extra


def _show(rows: Sequence[Row], limit: int = 15) -> str:
    shown = [f"      {r!r}" for r in sort_rows(rows)[:limit]]
    if len(rows) > limit:
        shown.append(f"      … {len(rows) - limit} more")
    return "\n".join(shown) or "      (none)"


# --- the harness -------------------------------------------------------------------------


FLOAT_TOLERANCE = 1e-9
"""Relative (and absolute, near zero) tolerance for float values in output columns: DuckDB's
float aggregates vary with row order (see the module docstring). Never for which rows."""


@dataclass
class Harness:
    """ivm and a DuckDB oracle side by side; ``apply`` runs one epoch and checks it."""

    tables_ddl: str | Sequence[str]
    domains: Mapping[str, Sequence[Any]] | None = None
    """Value domains by "table.column", replacing the defaults of ``default_domain``."""
    rel_tol: float = FLOAT_TOLERANCE
    abs_tol: float = FLOAT_TOLERANCE
    """Float values in output columns (only): DuckDB's float aggregates vary with row order."""
    exact_floats: bool = False
    """Compare float values exactly too (data where DuckDB's answer is order-free)."""
    connect: Callable[[], Any] = ivm.connect
    """Opens the session under test; called again by ``reopen`` (persistent state)."""
    existing: bool = False
    """The state ``connect`` reaches holds the tables already (a copy of one made before):
    their DDL runs in the oracle only; ``adopt`` then takes over what the state holds."""
    views: dict[str, str] = field(default_factory=dict, init=False)
    oracle_sql: dict[str, str] = field(default_factory=dict, init=False)
    """Per view, the SQL the oracle computes when it is not the view's own (see above)."""
    epochs_checked: int = field(default=0, init=False)
    history: list[Epoch] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        ddl = [self.tables_ddl] if isinstance(self.tables_ddl, str) else list(self.tables_ddl)
        self.specs = table_specs(ddl)
        overrides = dict(self.domains or {})
        self.value_domains = {
            name: {
                c.name: tuple(overrides.get(f"{name}.{c.name}")
                              or default_domain(c, c.name in spec.primary_key))
                for c in spec.columns
            }
            for name, spec in self.specs.items()
        }
        self.db = self.connect()
        self.oracle = duckdb.connect()
        for statement in ddl if not self.existing else ():
            self.db.execute(statement)
        for spec in self.specs.values():
            self.oracle.execute(spec.plain_ddl())
        self.schemas = {
            name: self.oracle.sql(f"SELECT * FROM {quote(name)} LIMIT 0").to_arrow_table().schema
            for name in self.specs
        }
        self.applied: dict[str, Counter[Row]] = {}
        """Per view: its contents after creation plus every delta since."""

    def close(self) -> None:
        self.db.close()
        self.oracle.close()

    def reopen(self) -> None:
        """Close the session and open it again (``connect`` must reach the same state),
        then check that nothing was lost."""
        epoch = self.db.epoch
        self.db.close()
        self.db = self.connect()
        assert self.db.epoch == epoch, f"reopened at epoch {self.db.epoch}, closed at {epoch}"
        self.check_tables("after reopening")
        self.check_views("after reopening")

    # -- state ---------------------------------------------------------------------------

    def contents(self, table: str) -> list[Row]:
        """The oracle's rows of ``table``, in a fixed order (so draws are reproducible)."""
        rows = self.oracle.execute(f"SELECT * FROM {quote(table)} ORDER BY ALL").fetchall()
        return [tuple(freeze(v) for v in row) for row in rows]

    def strategy(self, max_ops: int = 6, modes: Sequence[str] = MODES
                 ) -> st.SearchStrategy[Epoch]:
        """Epochs valid against the current contents."""
        contents = {name: self.contents(name) for name in self.specs}
        return epoch_strategy(self.specs, contents, self.value_domains, max_ops, modes)

    # -- views ---------------------------------------------------------------------------

    def create_views(
        self, views: Mapping[str, str], oracle: Mapping[str, str] | None = None
    ) -> None:
        """Create views (in order) in ivm and the oracle, then check their first contents.

        ``oracle`` overrides, per view, the SQL the oracle computes (see the module).
        """
        for name, sql in views.items():
            self.db.execute(f"CREATE VIEW {quote(name)} AS {sql}")
            reference = (oracle or {}).get(name, sql)
            self.oracle.execute(f"CREATE VIEW {quote(name)} AS {reference}")
            self.views[name] = sql
            self.oracle_sql[name] = reference
            self.applied[name] = Counter(rows_of(self.db.read(name)))
        for name in views:
            self.check_view(name)

    def adopt(self, views: Mapping[str, str], epochs: Sequence[Epoch] = ()) -> None:
        """Take over a state made before (``existing``): it holds ``views`` and has applied
        ``epochs`` (already checked when they ran). The oracle applies the epochs and
        creates the views; then every table and view is checked against it."""
        for epoch in epochs:
            self.history.append(epoch)
            for change in epoch.changes:
                self._apply_to_oracle(change)
        for name, sql in views.items():
            self.oracle.execute(f"CREATE VIEW {quote(name)} AS {sql}")
            self.views[name] = self.oracle_sql[name] = sql
            self.applied[name] = Counter(rows_of(self.db.read(name)))
        self.check_tables("the state taken over")
        self.check_views("the state taken over")

    def drop_view(self, name: str) -> None:
        """Drop a view in ivm and the oracle: it is no longer checked."""
        self.db.execute(f"DROP VIEW {quote(name)}")
        self.oracle.execute(f"DROP VIEW {quote(name)}")
        for per_view in (self.views, self.oracle_sql, self.applied):
            per_view.pop(name)

    # -- epochs --------------------------------------------------------------------------

    def apply(self, epoch: Epoch) -> None:
        """Ingest ``epoch`` into ivm, apply it to the oracle, and check everything."""
        self.history.append(epoch)
        batches = {c.table: c.render(self.specs[c.table], self.schemas[c.table])
                   for c in epoch.changes}
        before = self.db.epoch
        try:
            if epoch.single:
                ((table, batch),) = batches.items()
                deltas = self.db.ingest(table, batch)
            else:
                deltas = self.db.ingest(batches)
        except Exception as error:
            error.add_note(f"while ingesting epoch {len(self.history)}:\n{epoch!r}")
            raise
        for change in epoch.changes:
            self._apply_to_oracle(change)
        where = f"after epoch {len(self.history)}"
        # A batch with no rows at all is a no-op: the epoch stays (API: ingest).
        expected = before + (1 if any(len(b) for b in batches.values()) else 0)
        assert self.db.epoch == expected, (
            f"{where}: db.epoch is {self.db.epoch}, expected {expected}")
        self.check_tables(where)
        reads = {name: self.db.read(name) for name in self.views}
        self.check_deltas(deltas, where, reads)
        self.check_views(where, reads)
        if self.views:
            self.epochs_checked += 1

    def _apply_to_oracle(self, change: TableChange) -> None:
        spec, table = self.specs[change.table], quote(change.table)
        net = net_change(change.ops)
        inserts = [row for row, w in net.items() for _ in range(max(w, 0))]
        deletes = [(*row, -w) for row, w in net.items() if w < 0]
        cols = [quote(n) for n in spec.names]
        if deletes:
            data = pa.Table.from_pylist(
                [dict(d, __n=row[-1]) for d, row in zip(
                    _dicts(spec, [r[:-1] for r in deletes], self.schemas[change.table]),
                    deletes, strict=True)],
                schema=self.schemas[change.table].append(pa.field("__n", pa.int64())))
            match = " AND ".join(f"x.{c} IS NOT DISTINCT FROM d.{c}" for c in cols)
            self.oracle.register("__deletes", data)
            try:
                deleted = self.oracle.execute(
                    f"DELETE FROM {table} WHERE rowid IN ("
                    f"SELECT x.__rid FROM (SELECT rowid AS __rid, {', '.join(cols)}, "
                    f"row_number() OVER (PARTITION BY {', '.join(cols)} ORDER BY rowid) AS __rn "
                    f"FROM {table}) AS x JOIN __deletes AS d ON {match} WHERE x.__rn <= d.__n)"
                ).fetchall()[0][0]
            finally:
                self.oracle.unregister("__deletes")
            assert deleted == sum(row[-1] for row in deletes), (
                f"harness bug: deleted {deleted} oracle rows, meant {sum(r[-1] for r in deletes)}")
        if inserts:
            data = pa.Table.from_pylist(_dicts(spec, inserts, self.schemas[change.table]),
                                        schema=self.schemas[change.table])
            self.oracle.register("__inserts", data)
            try:
                self.oracle.execute(f"INSERT INTO {table} SELECT * FROM __inserts").fetchall()
            finally:
                self.oracle.unregister("__inserts")

    # -- checks --------------------------------------------------------------------------

    def _compare(self, what: str, expected: list[Row], actual: list[Row]) -> None:
        rel_tol, abs_tol = (0.0, 0.0) if self.exact_floats else (self.rel_tol, self.abs_tol)
        missing, extra = multiset_mismatch(expected, actual, rel_tol, abs_tol)
        floats = ("floats exactly" if self.exact_floats else
                  f"float values within {rel_tol:g} relative, DuckDB's varying with row order; "
                  "every other value exactly")
        assert not missing and not extra, (
            f"{what}: contents differ from DuckDB's recomputation "
            f"({len(expected)} rows expected, {len(actual)} read; {floats})\n"
            f"    expected but missing:\n{_show(missing)}\n"
            f"    read but not expected:\n{_show(extra)}"
        )

    def check_tables(self, where: str = "") -> None:
        for name in self.specs:
            read = self.db.read(name)
            if self._same_in_sql(name, read):
                continue
            self._compare(f"{where}: table {name}", self.contents(name), rows_of(read))

    def _same_in_sql(self, table: str, read: pa.Table) -> bool:
        """Whether DuckDB finds ``read`` equal to the oracle's ``table`` as a multiset: a
        fast path for large tables (rows equal in SQL are equal to ``_compare`` too);
        otherwise, or when DuckDB cannot compare the types, ``_compare`` decides."""
        self.oracle.register("__read", read)
        try:
            return self.oracle.execute(
                f"SELECT count(*) FROM ((SELECT * FROM __read EXCEPT ALL "
                f"SELECT * FROM {quote(table)}) UNION ALL (SELECT * FROM {quote(table)} "
                f"EXCEPT ALL SELECT * FROM __read))").fetchall()[0][0] == 0
        except duckdb.Error:
            return False
        finally:
            self.oracle.unregister("__read")

    def check_views(self, where: str = "initially",
                    reads: Mapping[str, pa.Table] | None = None) -> None:
        for name in self.views:
            self.check_view(name, where, reads[name] if reads else None)

    def check_view(self, name: str, where: str = "initially", read: pa.Table | None = None
                   ) -> None:
        """One view (``read``: its contents when already read) against the oracle (a, d)."""
        sql = self.views[name]
        actual = read if read is not None else self.db.read(name)
        expected = self.oracle.sql(self.oracle_sql[name]).to_arrow_table()
        # DuckDB's names for the view: the query's own, but CREATE VIEW renames
        # duplicates (k, k -> k, k_1).
        names = self.oracle.sql(f"SELECT * FROM {quote(name)} LIMIT 0").columns
        what = f"{where}: view {name} = {sql}"
        assert actual.column_names == names, (
            f"{what}: column names {actual.column_names}, DuckDB names {names}")
        # A view is stored, so an untyped NULL column is INTEGER, as DuckDB's
        # CREATE TABLE ... AS stores it.
        expected_types = [pa.int32() if t == pa.null() else t for t in expected.schema.types]
        assert actual.schema.types == expected_types, (
            f"{what}: column types {actual.schema.types}, DuckDB's {expected_types}")
        self._compare(what, rows_of(expected), rows_of(actual))
        planned = self.oracle.sql(self.db.plain_sql(name)).to_arrow_table()
        self._compare(f"{what}: its plan as plain SQL (the second oracle)",
                      rows_of(expected), rows_of(planned))

    def check_deltas(self, deltas: Mapping[str, pa.Table], where: str = "",
                     reads: Mapping[str, pa.Table] | None = None) -> None:
        assert set(deltas) == set(self.views), (
            f"{where}: ingest returned deltas for {sorted(deltas)}, views are {sorted(self.views)}")
        for name, delta in deltas.items():
            self.check_delta(name, delta, where, reads[name] if reads else None)

    def check_delta(self, name: str, delta: pa.Table, where: str = "",
                    read: pa.Table | None = None) -> None:
        """One view's delta (``read``: the view's contents when already read; b above)."""
        what = f"{where}: delta of view {name} = {self.views[name]}"
        read = read if read is not None else self.db.read(name)
        assert delta.column_names == [*read.column_names, WEIGHT], (
            f"{what}: columns {delta.column_names}, expected {read.column_names} + __w")
        assert delta.schema.types[:-1] == read.schema.types, (
            f"{what}: types {delta.schema.types[:-1]}, the view's {read.schema.types}")
        assert pa.types.is_integer(delta.schema.types[-1]), f"{what}: __w is not an integer"
        rows = rows_of(delta)
        zero = [r for r in rows if r[-1] == 0]
        assert not zero, f"{what}: rows with weight 0:\n{_show(zero)}"
        repeated = [r for r, n in Counter(r[:-1] for r in rows).items() if n > 1]
        assert not repeated, f"{what}: not consolidated, repeated rows:\n{_show(repeated)}"
        applied = self.applied[name]
        for *row, w in rows:
            applied[tuple(row)] += w
        negative = [(*r, n) for r, n in applied.items() if n < 0]
        assert not negative, (
            f"{what}: the deltas so far retract rows the view never held "
            f"(row, count):\n{_show(negative)}")
        expected = Counter({r: n for r, n in applied.items() if n > 0})
        self.applied[name] = expected
        actual = Counter(rows_of(read))
        only_summed = list((expected - actual).elements())
        only_read = list((actual - expected).elements())
        assert expected == actual, (
            f"{what}: initial contents + all deltas != db.read()\n"
            f"    in the deltas' sum, not read:\n{_show(only_summed)}\n"
            f"    read, not in the deltas' sum:\n{_show(only_read)}"
        )


def run_workload(
    tables_ddl: str | Sequence[str],
    views: Mapping[str, str],
    data: Any,
    *,
    epochs: int = 15,
    warmup: int = 1,
    max_ops: int = 6,
    modes: Sequence[str] = MODES,
    domains: Mapping[str, Sequence[Any]] | None = None,
    connect: Callable[[], Any] = ivm.connect,
    reopen_every: int = 0,
    oracle: Mapping[str, str] | None = None,
    exact_floats: bool = False,
    shorten: bool = True,
) -> int:
    """Run a random CDC workload drawn from hypothesis ``data`` (``st.data()``).

    Up to ``warmup`` epochs fill the tables before the views exist (so creating a
    view backfills existing rows), then ``epochs`` epochs are applied and checked
    one by one. ``modes`` shapes the epochs (see ``MODES``: repeat "clear" to empty
    tables more often). With ``reopen_every`` = n > 0 the session is closed and opened
    again (by ``connect``, which must then reach persistent state) every n epochs.
    ``oracle`` overrides the oracle's SQL per view (see the module docstring);
    ``exact_floats`` compares float values exactly too (``Harness.exact_floats``).
    ``make test`` runs the workload's first epochs only (``settings.shortened``: about
    half, at least two, past the first reopen); ``make test-deep``, or ``shorten=False``
    (a test that must find a sabotage in them), all ``epochs``.
    Returns the number of epochs checked with the views in place.
    """
    if shorten:
        epochs = shortened(epochs, reopen_every)
    random_workload(data)
    harness = Harness(tables_ddl, domains, connect=connect, exact_floats=exact_floats)
    try:
        for i in range(data.draw(st.integers(0, warmup), label="warmup epochs")):
            harness.apply(data.draw(harness.strategy(max_ops, modes), label=f"warmup {i + 1}"))
        harness.create_views(views, oracle)
        for i in range(epochs):
            harness.apply(data.draw(harness.strategy(max_ops, modes), label=f"epoch {i + 1}"))
            if reopen_every and (i + 1) % reopen_every == 0:
                harness.reopen()
        EPOCHS_CHECKED[_current_test()] += harness.epochs_checked
        return harness.epochs_checked
    finally:
        harness.close()


def random_workload(data: Any) -> None:
    """Reject hypothesis's first example, its all-minimal one: every draw its simplest
    value, so every epoch would insert the first row of the first table and nothing
    else. The next example hypothesis tries is random (and, derandomized, the same in
    every run), so a test of one example runs one real workload."""
    assume(data.draw(st.booleans(), label="a random workload"))


EPOCHS_CHECKED: Counter[str] = Counter()
"""Epochs checked with views in place, by pytest test id (to report coverage)."""


def _current_test() -> str:
    return os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0]
