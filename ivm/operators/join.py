"""Incremental inner join of n inputs: a delta query.

Meaning: join(R₁..Rₙ) holds (r₁‥rₙ) with weight w₁·…·wₙ where the condition holds.
Incremental form (DBSP, dogsdogsdogs): with Rᵢ the integral before this epoch and
ΔRᵢ this epoch's change,

    Δ join = Σᵢ ΔRᵢ ⋈ R₁..ᵢ₋₁(new) ⋈ Rᵢ₊₁..ₙ(old),    new = old ⊎ Δ.

Earlier inputs are read at their new version and later ones at their old
version, so a change to several inputs in one epoch is neither missed nor
counted twice. Terms whose ΔRᵢ is empty are skipped.

State: none of its own. Each input's integral is read from the traces below it
(a base table's trace, an aggregate's output trace…).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from ivm.plan.sql import join_sql, union_all_sql
from ivm.schema import Schema


def delta_join_sql(
    deltas: Sequence[str | None],
    olds: Sequence[str],
    schemas: Sequence[Schema],
    condition: exp.Expression | None,
) -> str | None:
    """SQL of the join's change, or None when no input changed."""
    terms = []
    for i, delta in enumerate(deltas):
        if delta is None:
            continue
        sources = []
        for j, old in enumerate(olds):
            if j < i and deltas[j] is not None:
                sources.append(union_all_sql([old, deltas[j]]))
            elif j == i:
                sources.append(delta)
            else:
                sources.append(old)
        terms.append(join_sql(sources, schemas, condition, weighted=True))
    if not terms:
        return None
    return terms[0] if len(terms) == 1 else union_all_sql(terms)
