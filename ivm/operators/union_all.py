"""UNION ALL: the rows of every input.

Meaning: the sum of the input Z-sets (inputs have the same column count; the
output is named and typed after the union, each input conformed first).
Linear: the sum of the inputs' changes. No state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ivm.operators.base import Operator
from ivm.plan.node import Plan
from ivm.plan.sql import union_all_sql


@dataclass(frozen=True, eq=False)
class UnionAll(Plan):
    """The rows of every input (same column count; named after the first input)."""

    parts: tuple[Plan, ...]

    def plain(self, inputs: Sequence[str]) -> str:
        return union_all_sql(inputs)

    def describe(self) -> str:
        return "UnionAll"


@dataclass(frozen=True, eq=False)
class UnionAllOperator(Operator):
    """The sum of the inputs' changes (linear)."""

    kind = "union_all"
    linear = True

    def linear_sql(self, inputs: Sequence[str | None]) -> str | None:
        present = [s for s in inputs if s is not None]
        if not present:
            return None
        return present[0] if len(present) == 1 else union_all_sql(present)
