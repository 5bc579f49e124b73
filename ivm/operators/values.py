"""Values: a constant relation, a VALUES list (``(VALUES (1, 'a'), (2, NULL)) AS t(k, v)``).

Meaning: each listed row with weight 1 (a row listed twice is two copies), whatever the
epoch: its Z-set is fixed by the plan.

Incremental form (``Constant``): the change of a fixed relation is its whole contents
exactly once, at the epoch its reader's state starts (``Run.backfill``: a view created,
over empty tables too, or rebuilt), and nothing afterwards; its integral is empty during
that backfill and its contents at every later epoch. It keeps no state (its contents are
its plan), so reopening persisted state emits nothing again. Being a leaf without a
relation name, a partitioned executor brings its change in at the backfill like any
change, hashed to the partitions of the stage that reads it, which keeps its integral
if it needs one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from ivm.operators.base import Operator, Run
from ivm.plan.node import Plan
from ivm.plan.sql import W, column_list, empty_relation, sql_of
from ivm.schema import quote


@dataclass(frozen=True, eq=False)
class Values(Plan):
    """The rows of a VALUES list, each a tuple of constant expressions (one per column)."""

    rows: tuple[tuple[exp.Expression, ...], ...]

    def plain(self, inputs: Sequence[str]) -> str:
        return f"SELECT {column_list(self.schema.names)} FROM {self.values_sql()}"

    def values_sql(self) -> str:
        """The VALUES list as a FROM item naming the node's columns."""
        rows = ", ".join("(" + ", ".join(sql_of(e) for e in row) + ")" for row in self.rows)
        names = ", ".join(quote(n) for n in self.schema.names)
        return f"(VALUES {rows}) AS __ivm_values({names})"

    def describe(self) -> str:
        count = len(self.rows)
        return f"Values {count} row{'' if count == 1 else 's'} ({', '.join(self.schema.names)})"

    def row_expressions(self) -> tuple[exp.Expression, ...]:
        return tuple(e for row in self.rows for e in row)


@dataclass(frozen=True, eq=False)
class Constant(Operator):
    """A fixed relation: its contents as the change of the backfill, as the integral after."""

    kind = "values"

    def contents(self) -> str:
        """The relation as a Z-set: every listed row with weight 1."""
        assert isinstance(self.node, Values)
        names = column_list(self.schema.names)
        return f"SELECT {names}, CAST(1 AS BIGINT) AS {W} FROM {self.node.values_sql()}"

    def change(self, run: Run) -> str | None:
        return self.contents() if run.backfill else None

    def integral(self, run: Run) -> str:
        return empty_relation(self.schema) if run.backfill else self.contents()

    def label(self) -> str:
        return f"Constant {self.node.describe()} (change: its rows at the backfill only)"
