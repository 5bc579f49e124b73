"""Pass: a join whose equi-join hypergraph is cyclic becomes a worst-case-optimal join.

Triangles, 4-cycles, k-cliques (self-joins of one table included) maintained by a
binary or delta-query plan read, for a change at a high-degree node, every 2-path
through it; ``ivm.operators.generic_join`` extends a change attribute by attribute
instead, each prefix proposed by the input with the fewest extensions.

``join_plan`` chooses (the session's ``join_plan``, or a view's hint
``/*+ wcoj */`` / ``/*+ binary_join */``):

* ``"auto"``: cyclic joins (``JoinShape.cyclic``) become ``GenericJoin``; acyclic
  ones keep today's plan;
* ``"wcoj"``: every connected equi-join of two or more inputs becomes one;
* ``"binary"``: none does (today's plan: the n-way delta query embedded, binary
  joins in Spark mode).

A filter right above a join is read as part of its condition first (``FROM a, b, c
WHERE …`` is a join on the WHERE's equalities); where no generic join results, the
circuit keeps its own operators.
"""

from __future__ import annotations

from ivm.circuit.circuit import Circuit
from ivm.operators.base import Operator
from ivm.operators.filter import Filter
from ivm.operators.generic_join import GenericJoin
from ivm.operators.join import DeltaJoin, conjuncts
from ivm.operators.join_hypergraph import JoinShape
from ivm.passes.binary_joins import merge_filter

JOIN_PLANS = ("auto", "wcoj", "binary")
"""The plans ``join_plan`` may ask for."""


def cyclic_joins(circuit: Circuit, join_plan: str = "auto") -> Circuit:
    """``circuit`` with its cyclic joins (every eligible join, with ``"wcoj"``) as
    worst-case-optimal joins."""
    if join_plan not in JOIN_PLANS:
        raise ValueError(f"join_plan must be one of {JOIN_PLANS}, not {join_plan!r}")
    if join_plan == "binary":
        return circuit
    return circuit.rewrite(lambda op: _generic(op, force=join_plan == "wcoj"))


def _generic(op: Operator, force: bool) -> Operator:
    join = op
    if isinstance(op.node, Filter) and isinstance(op.inputs[0], DeltaJoin):
        join = merge_filter(op)
    if not isinstance(join, DeltaJoin) or len(join.inputs) < 2:
        return op
    shape = JoinShape.of([i.schema.names for i in join.inputs], conjuncts(join.join.condition))
    if shape is None or not shape.attributes or not shape.connected():
        return op
    if not (force or shape.cyclic()):
        return op
    return GenericJoin(join.node, join.inputs)
