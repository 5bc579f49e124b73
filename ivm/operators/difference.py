"""Difference of a bag and a sub-bag of it: A − B where B ⊆ A.

Meaning: (r, w_A(r) − w_B(r)) for every row r. The planner builds it only where
the subtrahend is contained in the minuend as bags (the rows of L that a semi
join keeps, taken from L: L − L ⋉ R is the anti join), so the plain (bag) SQL
``A EXCEPT ALL B`` means the same thing.

Linear: the change is ΔA − ΔB (the signed sum of its inputs, signs +1 and −1).
No state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ivm.operators.base import Operator
from ivm.plan.node import Plan
from ivm.plan.sql import W, union_all_sql


@dataclass(frozen=True, eq=False)
class Difference(Plan):
    """``minuend`` minus ``subtrahend`` (same columns; the subtrahend is a sub-bag)."""

    minuend: Plan
    subtrahend: Plan

    def plain(self, inputs: Sequence[str]) -> str:
        return f"SELECT * FROM ({inputs[0]}) AS __a EXCEPT ALL SELECT * FROM ({inputs[1]}) AS __b"

    def describe(self) -> str:
        return "Difference (minuend − subtrahend)"


def negated_sql(source: str) -> str:
    """``source`` (a weighted relation) with every weight negated."""
    return f"SELECT * REPLACE (-{W} AS {W}) FROM ({source}) AS __neg"


@dataclass(frozen=True, eq=False)
class DifferenceOperator(Operator):
    """The minuend's change minus the subtrahend's (linear)."""

    kind = "difference"
    linear = True

    def linear_sql(self, inputs: Sequence[str | None]) -> str | None:
        parts = []
        if inputs[0] is not None:
            parts.append(inputs[0])
        if inputs[1] is not None:
            parts.append(negated_sql(inputs[1]))
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else union_all_sql(parts)

    def input_signs(self) -> tuple[int, ...]:
        return (1, -1)
