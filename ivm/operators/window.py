"""Window functions: the Window plan node and its incremental form, a per-key recompute.

Meaning: one output row per input row copy (a row of weight 3 is three rows, as
it is to ROW_NUMBER): the row's columns, then one value per call, computed as
DuckDB computes ``call OVER (PARTITION BY … ORDER BY … frame)`` over the row's
*partition* (the rows sharing the ``partition`` columns' values, NULL equal to
NULL). Without PARTITION BY the whole input is one partition (a *global* window).

Where DuckDB's value depends on how it orders peers (rows equal in ORDER BY),
ivm breaks the ties by the input's remaining columns (every column not in
PARTITION BY or the ORDER BY, in input order, ascending, NULLs last), so only
identical rows stay tied, and they are interchangeable:

* ROW_NUMBER, NTILE, LAG, LEAD, and any call over a ROWS frame: those columns
  extend the OVER clause's ORDER BY (these depend on positions, never on peers);
* FIRST_VALUE, LAST_VALUE, NTH_VALUE over a RANGE or GROUPS frame (the default):
  they order the frame's rows inside the call (``FIRST_VALUE(x ORDER BY o, rest)``),
  which leaves the frame and its peers as they are;
* RANK, DENSE_RANK, PERCENT_RANK, CUME_DIST and aggregates over RANGE or GROUPS
  frames depend on peers only: unchanged. An ordered STRING_AGG / LIST breaks its
  own ties by the aggregated values (``AggregateCall.sql``).

Incremental form: the per-key operator (``ivm.operators.per_key``) keyed by the
partition columns. For each partition the change touches, the window is
evaluated over the partition's live rows expanded into copies, each output row
with weight 1, and what the output held for the partition is subtracted. A
global window is one partition: any change recomputes every row (one insert may
shift every rank, and the change says so), and in Spark mode it runs on one
partition.

State: the per-key operator's: the input's rows and the output, by partition key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from ivm.operators.aggregate import AggregateCall, SortKey
from ivm.operators.per_key import PerKey
from ivm.plan.node import Plan
from ivm.plan.sql import W, column_list, expand_sql, sql_of
from ivm.schema import quote

POSITIONAL = frozenset({"row_number", "ntile", "lag", "lead"})
"""Functions of a row's position in its partition's order (ties broken in OVER's ORDER BY)."""

PICKING = frozenset({"first_value", "last_value", "nth_value"})
"""Functions that pick one row of the frame (ties broken by an ORDER BY inside the call,
unless the frame is ROWS)."""

PEERS = frozenset({"rank", "dense_rank", "percent_rank", "cume_dist"})
"""Functions of peer groups only: ties do not matter."""

FUNCTIONS = POSITIONAL | PICKING | PEERS
"""The window functions other than aggregates."""

AGGREGATE = "aggregate"
"""``WindowCall.function`` of an aggregate computed over a window."""


@dataclass(frozen=True)
class WindowCall:
    """One call over a window, named ``name`` in the output.

    ``function``: a name of ``FUNCTIONS`` with its ``args`` (input column references
    and constants), or ``AGGREGATE`` with ``aggregate`` (the call over input columns);
    ``ignore_nulls``: ``IGNORE NULLS``; ``order``: the OVER clause's ORDER BY;
    ``frame``: its frame (a sqlglot ``WindowSpec``), None for the default.
    """

    name: str
    function: str
    args: tuple[exp.Expression, ...] = ()
    aggregate: AggregateCall | None = None
    ignore_nulls: bool = False
    order: tuple[SortKey, ...] = ()
    frame: exp.Expression | None = None

    @property
    def rows_frame(self) -> bool:
        """True for an explicit ROWS frame (its rows depend on the order of peers)."""
        return self.frame is not None and str(self.frame.args.get("kind")).upper() == "ROWS"

    def sql(self, partition: Sequence[str], columns: Sequence[str]) -> str:
        """The call as DuckDB SQL over input ``columns`` partitioned by ``partition``: ivm's
        deterministic version (ties broken as the module docstring says)."""
        ordered = {k.column for k in self.order} | set(partition)
        rest = tuple(SortKey(c) for c in columns if c not in ordered)
        over, inside = self.order, ()
        if self.function in POSITIONAL or self.rows_frame:
            over = self.order + rest
        elif self.function in PICKING:
            inside = self.order + rest
        clauses = []
        if partition:
            clauses.append(f"PARTITION BY {column_list(partition)}")
        if over:
            clauses.append("ORDER BY " + ", ".join(k.sql() for k in over))
        if self.frame is not None:
            clauses.append(sql_of(self.frame))
        return f"{self._call(inside)} OVER ({' '.join(clauses)})"

    def _call(self, inside: tuple[SortKey, ...]) -> str:
        if self.aggregate is not None:
            return self.aggregate.sql()
        args = ", ".join(sql_of(a) for a in self.args)
        order = " ORDER BY " + ", ".join(k.sql() for k in inside) if inside else ""
        nulls = " IGNORE NULLS" if self.ignore_nulls else ""
        return f"{self.function.upper()}({args}{order}{nulls})"


@dataclass(frozen=True, eq=False)
class Window(Plan):
    """``calls`` over the windows of ``input`` partitioned by ``partition`` (input column
    names; empty: one global partition). Output: the input's columns, then one column
    per call."""

    input: Plan
    partition: tuple[str, ...]
    calls: tuple[WindowCall, ...]

    def plain(self, inputs: Sequence[str]) -> str:
        return window_sql(inputs[0], self)

    def describe(self) -> str:
        return f"Window by [{_keys(self)}] " + ", ".join(_described(c, self) for c in self.calls)


def window_sql(source: str, node: Window) -> str:
    """Every row of ``source`` (rows of ``node``'s input, one per copy) with ``node``'s calls."""
    names = node.input.schema.names
    calls = [f"{c.sql(node.partition, names)} AS {quote(c.name)}" for c in node.calls]
    return f"SELECT {column_list(names)}, {', '.join(calls)} FROM ({source}) AS __in"


def _keys(node: Window) -> str:
    return ", ".join(node.partition) or "(global)"


def _described(call: WindowCall, node: Window) -> str:
    return f"{call.name} := {call.sql(node.partition, node.input.schema.names)}"


@dataclass(frozen=True, eq=False)
class WindowOperator(PerKey):
    """Window functions recomputed per touched partition from its live rows."""

    kind = "window"

    @property
    def window(self) -> Window:
        """The window's plan node."""
        assert isinstance(self.node, Window)
        return self.node

    @property
    def keys(self) -> tuple[str, ...]:
        return self.window.partition

    def group_sql(self, live: str) -> str:
        node = self.window
        rows = window_sql(expand_sql(live, node.input.schema.names), node)
        return f"SELECT {column_list(node.schema.names)}, 1::BIGINT AS {W} FROM ({rows}) AS w"

    def label(self) -> str:
        node = self.window
        scope = (
            "global: every change recomputes the one partition"
            if not node.partition else "per touched partition"
        )
        calls = ", ".join(_described(c, node) for c in node.calls)
        return (
            f"Window by [{_keys(node)}] {calls} ({scope}; state is the input's rows and the "
            "output, by partition key)"
        )
