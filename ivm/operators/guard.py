"""Guard: the input unchanged, or an error when a live row breaks a rule.

Meaning: (r, w) ↦ (r, w); evaluating the view fails (DuckDB's ``error(message)``,
an ``ExecutionError`` that rejects the epoch) when a row with positive weight
satisfies ``violation``. A scalar subquery that returns two rows for a live
outer row is such a rule: DuckDB fails the query, so the epoch must fail too.

Why not a filter that raises: a delta query's change is a sum of terms, and a
term may hold a row that only exists transiently (an outer row deleted this epoch
meets its key's new second subquery row in ``ΔA ⋈ L_old``, and cancels against
``ΔL ⋈ A_new``). The guard consolidates the change first, so it sees each row's
net change once: no row violating the rule is live before an epoch (such an
epoch would have failed), so a violating row is live after it exactly when its
net change is positive.

State: none. Partitioned, its input is hashed by the whole row, so each row's
terms meet in one partition to consolidate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from ivm.operators.base import Operator, Run
from ivm.plan.node import Plan
from ivm.plan.sql import W, consolidate_sql, sql_of


@dataclass(frozen=True, eq=False)
class Guard(Plan):
    """``input`` as it is; an error ``message`` when a row satisfies ``violation``."""

    input: Plan
    violation: exp.Expression
    message: str

    def plain(self, inputs: Sequence[str]) -> str:
        return f"SELECT * FROM ({inputs[0]}) AS __in WHERE {self.check_sql()}"

    def describe(self) -> str:
        return f"Guard fails when {sql_of(self.violation)}"

    def row_expressions(self) -> tuple[exp.Expression, ...]:
        return (self.violation,)

    def check_sql(self, weight: str | None = None) -> str:
        """A predicate that is true, or raises for a violating row (with ``weight``, the
        weight column: only for a row whose weight is positive)."""
        live = f"{weight} > 0 AND " if weight else ""
        message = exp.Literal.string(self.message).sql(dialect="duckdb")
        return (
            f"CASE WHEN {live}({sql_of(self.violation)}) THEN error({message}) "
            "ELSE TRUE END"
        )


@dataclass(frozen=True, eq=False)
class IncrementalGuard(Operator):
    """The input's change, consolidated, checked row by row."""

    kind = "guard"

    @property
    def guard(self) -> Guard:
        """The guard's plan node."""
        assert isinstance(self.node, Guard)
        return self.node

    def input_keys(self) -> tuple[tuple[str, ...] | None, ...]:
        return (tuple(self.schema.names),)

    def change(self, run: Run) -> str | None:
        change = run.change(self.inputs[0])
        if change is None:
            return None
        consolidated = consolidate_sql(change, self.schema.names)
        return run.materialize(
            self, "checked",
            f"SELECT * FROM ({consolidated}) AS __c WHERE {self.guard.check_sql(W)}",
        )

    def integral(self, run: Run) -> str:
        return run.integral(self.inputs[0])

    def label(self) -> str:
        return (
            f"Guard: the change consolidated, failing the epoch when a live row has "
            f"{sql_of(self.guard.violation)} (no state)"
        )
