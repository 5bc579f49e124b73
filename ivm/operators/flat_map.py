"""FlatMap: each input row followed by each row a query computes from that row alone.

Meaning: (r, w) ↦ {((r, e), w) : e ∈ expand(r)}, where ``expand(r)`` is a query (UNNEST of
a list, ``generate_series``, a LATERAL subquery reading only the row…) evaluated for the
row r; a row it expands to nothing contributes nothing, one it expands to n rows (copies
included) contributes n rows, each with r's weight. Since ``expand`` reads nothing but r,
FlatMap distributes over sums: the flat map of a change is the change of the flat map.
Linear: applied to the change as it is. No state.

DuckDB computes it: ``SELECT r.*, e.* FROM change AS r, LATERAL (expand(r)) AS e``, the
weight passing through.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from ivm.operators.base import Operator
from ivm.plan.node import Plan
from ivm.plan.sql import W, column_list, sql_of
from ivm.schema import quote

ROW = "__ivm_row"
"""The alias of the input row inside the expansion: it reads column c as ``__ivm_row."c"``."""
EXPANDED = "__ivm_expanded"


def row_column(name: str) -> exp.Column:
    """A reference to the input row's column ``name`` inside an expansion."""
    return exp.column(exp.to_identifier(name, quoted=True), table=exp.to_identifier(ROW))


@dataclass(frozen=True, eq=False)
class FlatMap(Plan):
    """The input's columns, then the expansion's, named ``names`` (one per expansion column,
    in order): every input row joined with the rows ``expansion`` gives for it. The
    expansion reads the row's columns as ``row_column(name)`` and nothing else."""

    input: Plan
    expansion: exp.Query
    names: tuple[str, ...]

    def plain(self, inputs: Sequence[str]) -> str:
        return self.expanded_sql(inputs[0], weighted=False)

    def expanded_sql(self, source: str, weighted: bool) -> str:
        """The flat map of ``source`` (a Z-set when ``weighted``: its weight passes through)."""
        columns = [column_list(self.input.schema.names, ROW)] if self.input.schema.names else []
        columns.append(f"{EXPANDED}.*")
        if weighted:
            columns.append(f"{ROW}.{W}")
        names = f"({', '.join(quote(n) for n in self.names)})" if self.names else ""
        return (
            f"SELECT {', '.join(columns)} FROM ({source}) AS {ROW}, "
            f"LATERAL ({sql_of(self.expansion)}) AS {EXPANDED}{names}"
        )

    def describe(self) -> str:
        return f"FlatMap ({', '.join(self.names)}) := {sql_of(self.expansion)}"


@dataclass(frozen=True, eq=False)
class FlatMapOperator(Operator):
    """A flat map of the change (linear)."""

    kind = "flat_map"
    linear = True

    def linear_sql(self, inputs: Sequence[str | None]) -> str | None:
        assert isinstance(self.node, FlatMap)
        return None if inputs[0] is None else self.node.expanded_sql(inputs[0], weighted=True)

    def column_origin(self, column: str) -> str | None:
        """The input's columns pass through unchanged."""
        assert isinstance(self.node, FlatMap)
        return column if column in self.node.input.schema.names else None
