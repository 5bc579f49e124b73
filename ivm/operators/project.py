"""Project: one output row per input row, computed by scalar expressions.

Meaning: (r, w) ↦ (f(r), w). Linear: applied to the change as it is. No state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from ivm.operators.base import Operator
from ivm.plan.node import Plan
from ivm.plan.sql import project_sql, sql_of


@dataclass(frozen=True, eq=False)
class Project(Plan):
    """One output row per input row: ``exprs`` are (output name, expression) pairs."""

    input: Plan
    exprs: tuple[tuple[str, exp.Expression], ...]

    def plain(self, inputs: Sequence[str]) -> str:
        return project_sql(inputs[0], self.exprs, weighted=False)

    def describe(self) -> str:
        return "Project " + ", ".join(
            n if sql_of(e) == f'"{n}"' else f"{n} := {sql_of(e)}" for n, e in self.exprs
        )

    def row_expressions(self) -> tuple[exp.Expression, ...]:
        return tuple(e for _, e in self.exprs if not isinstance(e, exp.Column))


@dataclass(frozen=True, eq=False)
class ProjectOperator(Operator):
    """A projection of the change (linear)."""

    kind = "project"
    linear = True

    def linear_sql(self, inputs: Sequence[str | None]) -> str | None:
        assert isinstance(self.node, Project)
        return None if inputs[0] is None else project_sql(inputs[0], self.node.exprs, True)

    def columns_read(self, needed: tuple[str, ...] | None) -> tuple[str, ...] | None:
        """Every input column its expressions name (it computes all of its outputs)."""
        node = self.node
        assert isinstance(node, Project)
        source = node.input.schema.names
        named = {c.name for _, e in node.exprs for c in e.find_all(exp.Column)}
        if not named <= set(source) or any(e.find(exp.Star) for _, e in node.exprs):
            return None
        return tuple(n for n in source if n in named)

    def column_origin(self, column: str) -> str | None:
        """The input column ``column`` is, unchanged (or cast to the type it already has)."""
        node = self.node
        assert isinstance(node, Project)
        expression = dict(node.exprs).get(column)
        if expression is None:
            return None
        source = node.input.schema
        if isinstance(expression, exp.Cast):
            inner = expression.this
            if not isinstance(inner, exp.Column) or inner.name not in source.names:
                return None
            if source.type_of(inner.name) != node.schema.type_of(column):
                return None
            expression = inner
        if isinstance(expression, exp.Column) and expression.name in source.names:
            return expression.name
        return None
