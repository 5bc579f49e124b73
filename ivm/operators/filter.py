"""Filter: the rows of the input for which a predicate is true.

Meaning: (r, w) ↦ (r, w) where the predicate holds for r (not NULL, not false).
Linear: the same filter applied to the change is the output's change. No state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from ivm.operators.base import Operator
from ivm.plan.node import Plan
from ivm.plan.sql import filter_sql, sql_of


@dataclass(frozen=True, eq=False)
class Filter(Plan):
    """Rows of ``input`` for which ``predicate`` is true (not NULL, not false)."""

    input: Plan
    predicate: exp.Expression

    def plain(self, inputs: Sequence[str]) -> str:
        return filter_sql(inputs[0], self.predicate)

    def describe(self) -> str:
        return f"Filter {sql_of(self.predicate)}"

    def row_expressions(self) -> tuple[exp.Expression, ...]:
        return (self.predicate,)


@dataclass(frozen=True, eq=False)
class FilterOperator(Operator):
    """A filter on the change (linear)."""

    kind = "filter"
    linear = True

    def linear_sql(self, inputs: Sequence[str | None]) -> str | None:
        assert isinstance(self.node, Filter)
        return None if inputs[0] is None else filter_sql(inputs[0], self.node.predicate)

    def column_origin(self, column: str) -> str | None:
        return column

    def columns_read(self, needed: tuple[str, ...] | None) -> tuple[str, ...] | None:
        """The columns needed above and those its predicate names (it passes rows whole)."""
        node = self.node
        assert isinstance(node, Filter)
        source = node.input.schema.names
        named = {c.name for c in node.predicate.find_all(exp.Column)}
        if needed is None or not named <= set(source):
            return None
        return tuple(n for n in source if n in named or n in needed)
