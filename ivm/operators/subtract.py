"""Subtract: the rows of one input minus the rows of another.

Meaning: left − right as Z-sets: (r, w) of ``left`` and (r, −w) of ``right``.
The planner uses it only where ``right`` is contained in ``left`` as a bag
(an anti-join is L − (L ⋉ R); the unmatched rows of a left join are
L − π_L(L ⋈ A) where A has one row per key), so the result never holds a
negative multiplicity and its plain form is ``EXCEPT ALL``.

Linear: the change is Δleft − Δright. No state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ivm.operators.base import Operator
from ivm.plan.node import Plan
from ivm.plan.sql import W, column_list, union_all_sql


@dataclass(frozen=True, eq=False)
class Subtract(Plan):
    """``left`` minus ``right`` (same columns; ``right`` a sub-bag of ``left``)."""

    left: Plan
    right: Plan

    def plain(self, inputs: Sequence[str]) -> str:
        return f"SELECT * FROM ({inputs[0]}) AS __l EXCEPT ALL SELECT * FROM ({inputs[1]}) AS __r"

    def describe(self) -> str:
        return "Subtract"


@dataclass(frozen=True, eq=False)
class SubtractOperator(Operator):
    """The left change plus the negated right change (linear)."""

    kind = "subtract"
    linear = True

    def linear_sql(self, inputs: Sequence[str | None]) -> str | None:
        left, right = inputs
        negated = None
        if right is not None:
            cols = column_list(self.schema.names)
            negated = f"SELECT {cols}, -{W} AS {W} FROM ({right}) AS __neg"
        present = [s for s in (left, negated) if s is not None]
        if not present:
            return None
        return present[0] if len(present) == 1 else union_all_sql(present)

    def input_signs(self) -> tuple[int, ...]:
        return (1, -1)
