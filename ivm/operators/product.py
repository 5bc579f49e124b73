"""Cross product of small relations, recomputed whole when any of them changes.

Meaning: product(R₁..Rₙ) holds (r₁‥rₙ) with weight w₁·…·wₙ (a join without a
condition). Incremental form: with Rᵢ the integral before this epoch and
Rᵢ' = Rᵢ ⊎ ΔRᵢ (consolidated) after it,

    Δ product = R₁' × … × Rₙ'  −  R₁ × … × Rₙ,

which holds for any inputs, and is what to compute when every input is tiny:
the planner builds it for the values of uncorrelated scalar subqueries (a
global aggregate has exactly one row), each a one-row relation. Its SQL reads
each input's change and integral once, so it grows linearly with n, where the
delta query of ``join`` (Σᵢ ΔRᵢ ⋈ earlier new ⋈ later old) reads them n times
and a chain of binary joins reads its lower changes twice per level.

State: none of its own; each input's integral is read from the traces below it
(an aggregate's output trace). Partitioned, it runs in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ivm.operators.base import Operator, Run
from ivm.operators.difference import negated_sql
from ivm.plan.node import Plan
from ivm.plan.sql import consolidate_sql, join_sql, union_all_sql


@dataclass(frozen=True, eq=False)
class Product(Plan):
    """Cross product of ``relations`` (each expected to hold a row or a few); the output
    columns are theirs in order (names unique across them)."""

    relations: tuple[Plan, ...]

    def plain(self, inputs: Sequence[str]) -> str:
        return join_sql(inputs, [r.schema for r in self.relations], None, False)

    def describe(self) -> str:
        return f"Product of {len(self.relations)} inputs"


@dataclass(frozen=True, eq=False)
class RecomputedProduct(Operator):
    """The product after the epoch minus the product before it."""

    kind = "product"

    @property
    def product(self) -> Product:
        """The plan node."""
        assert isinstance(self.node, Product)
        return self.node

    def input_keys(self) -> tuple[tuple[str, ...] | None, ...]:
        return tuple(() for _ in self.inputs)

    def reads_integrals(self) -> tuple[bool, ...]:
        return tuple(True for _ in self.inputs)

    def change(self, run: Run) -> str | None:
        deltas = [run.change(i) for i in self.inputs]
        if all(d is None for d in deltas):
            return None
        olds = [run.integral(i) for i in self.inputs]
        news = [
            old if delta is None
            else consolidate_sql(union_all_sql([old, delta]), op.schema.names)
            for op, old, delta in zip(self.inputs, olds, deltas, strict=True)
        ]
        schemas = [i.schema for i in self.inputs]
        after = join_sql(news, schemas, None, weighted=True)
        before = join_sql(olds, schemas, None, weighted=True)
        return union_all_sql([after, negated_sql(before)])

    def integral(self, run: Run) -> str:
        olds = [run.integral(i) for i in self.inputs]
        return join_sql(olds, [i.schema for i in self.inputs], None, weighted=True)

    def label(self) -> str:
        return (
            f"Product of {len(self.inputs)} inputs, recomputed when one changes "
            "(state: the inputs' integrals)"
        )
