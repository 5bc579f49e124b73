"""Pass: a join whose equi-join hypergraph is cyclic becomes a worst-case-optimal join.

Triangles, 4-cycles, k-cliques (self-joins of one table included) maintained by a
binary or delta-query plan read, for a change at a high-degree node, every 2-path
through it; ``ivm.operators.generic_join`` extends a change attribute by attribute
instead, each prefix proposed by the input with the fewest extensions.

``join_plan`` chooses (the session's ``join_plan``, or a view's hint
``/*+ wcoj */`` / ``/*+ binary_join */``):

* ``"auto"``: cyclic joins (``JoinShape.cyclic``) become ``GenericJoin`` where the
  cycle can blow up: at least two inputs of its core (what the GYO reduction leaves)
  are not keyed by one of their join attributes (a base table's one-column primary key,
  through filters and projections). A cycle closed by key/foreign-key joins (TPC-H
  Q5's nation key) grows no 2-paths and keeps today's plan, as acyclic joins do, and so
  do joins of more than ``AUTO_MAX_INPUTS`` inputs;
* ``"wcoj"``: every connected equi-join of two or more inputs becomes one;
* ``"binary"``: none does (today's plan: the n-way delta query embedded, binary
  joins in Spark mode).

A filter right above a join is read as part of its condition first (``FROM a, b, c
WHERE …`` is a join on the WHERE's equalities); where no generic join results, the
circuit keeps its own operators.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ivm.circuit.circuit import Circuit
from ivm.operators.base import Operator
from ivm.operators.filter import Filter
from ivm.operators.generic_join import GenericJoin
from ivm.operators.join import DeltaJoin, conjuncts
from ivm.operators.join_hypergraph import JoinShape
from ivm.operators.scan import Source
from ivm.passes.binary_joins import merge_filter

JOIN_PLANS = ("auto", "wcoj", "binary")
"""The plans ``join_plan`` may ask for."""

AUTO_MAX_INPUTS = 8
"""``"auto"`` leaves wider joins to today's plans (``wide_joins`` splits those of more
than 12): a generic join's rule per input runs its steps one after another, each a few
statements, so an epoch changing all of n inputs costs O(n²) statements."""


@dataclass(frozen=True)
class JoinPlan:
    """What a view asks of its joins: ``choice`` (one of ``JOIN_PLANS``), and the base
    tables' primary keys (by table name) that tell key joins apart."""

    choice: str = "auto"
    keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def cyclic_joins(circuit: Circuit, join_plan: JoinPlan | str | None = None) -> Circuit:
    """``circuit`` with its cyclic joins (every eligible join, with ``"wcoj"``) as
    worst-case-optimal joins (None: ``"auto"``, without primary keys)."""
    plan = join_plan if isinstance(join_plan, JoinPlan) else JoinPlan(join_plan or "auto")
    if plan.choice not in JOIN_PLANS:
        raise ValueError(f"join_plan must be one of {JOIN_PLANS}, not {plan.choice!r}")
    if plan.choice == "binary":
        return circuit
    return circuit.rewrite(lambda op: _generic(op, plan))


def _generic(op: Operator, plan: JoinPlan) -> Operator:
    join = op
    if isinstance(op.node, Filter) and isinstance(op.inputs[0], DeltaJoin):
        join = merge_filter(op)
    if not isinstance(join, DeltaJoin) or len(join.inputs) < 2:
        return op
    shape = JoinShape.of([i.schema.names for i in join.inputs], conjuncts(join.join.condition))
    if shape is None or not shape.attributes or not shape.connected():
        return op
    if plan.choice == "auto":
        if len(join.inputs) > AUTO_MAX_INPUTS:
            return op
        unkeyed = [
            i for i in shape.core()
            if not any(_keyed(join.inputs[i], c, plan.keys) for c in shape.columns_of(i).values())
        ]
        if len(unkeyed) < 2:
            return op
    return GenericJoin(join.node, join.inputs)


def _keyed(op: Operator, column: str, keys: Mapping[str, tuple[str, ...]]) -> bool:
    """True when ``column`` of ``op`` is a base table's one-column primary key, passed up
    through operators that keep or drop rows one by one (filters, projections)."""
    while not isinstance(op, Source):
        origin = op.column_origin(column) if op.linear and len(op.inputs) == 1 else None
        if origin is None:
            return False
        op, column = op.inputs[0], origin
    return keys.get(op.name) == (column,)
