"""Pass: a fused join read more than once gets an arrangement (embedded mode).

A join without state of its own is SQL text inside whatever reads it (see
``ivm.operators.arrange``). Where such a join, or a fused operator above one, is
read by more than one operator (or twice by one), each reader would write it out
again, and chains of outer or anti joins grow exponentially. The pass puts an
``Arrangement`` there: a trace of that relation, read as a table.

Only fused relations holding a join are arranged: a projection of a base table is
read from the table's own trace already, and arranging it would copy the table.
A filter right above a join read more than once is merged into a join of its own first
(the shared join is often a cross product that only the filters make small).
A partitioned executor needs none of this (each stage's inputs arrive materialized).
"""

from __future__ import annotations

from collections import Counter

from ivm.circuit.circuit import Circuit
from ivm.operators.arrange import Arrange, Arrangement
from ivm.operators.base import Operator
from ivm.operators.join import DeltaJoin, fused_join
from ivm.passes.binary_joins import merge_filter


def arrange_shared(circuit: Circuit, partitioned: bool = False) -> Circuit:
    """``circuit`` with an arrangement above every fused join read more than once."""
    if partitioned:
        return circuit
    circuit = _unshared_filters(circuit)
    reads: Counter[str] = Counter(i.fingerprint for op in circuit.operators for i in op.inputs)
    shared = {op.fingerprint for op in circuit.operators
              if reads[op.fingerprint] > 1 and fused_join(op)}
    if not shared:
        return circuit
    done: dict[str, Operator] = {}
    for op in circuit.operators:  # inputs first
        inputs = tuple(done[i.fingerprint] for i in op.inputs)
        rebuilt = op if inputs == op.inputs else op.with_inputs(inputs)
        if op.fingerprint in shared:
            rebuilt = Arrangement(Arrange(rebuilt.schema, rebuilt.node), (rebuilt,))
        done[op.fingerprint] = rebuilt
    return Circuit.of(circuit.view, done[circuit.output.fingerprint])


def _unshared_filters(circuit: Circuit) -> Circuit:
    """``circuit`` with each filter right above a join read more than once merged into a
    join of its own. Subqueries with the same FROM and different WHERE clauses read one
    join (often a cross product the filters turn into an equi-join): arranging it would
    store the whole product, while each filtered join is small."""
    reads: Counter[str] = Counter(i.fingerprint for op in circuit.operators for i in op.inputs)

    def step(op: Operator) -> Operator:
        below = op.inputs[0] if op.inputs else None
        if isinstance(below, DeltaJoin) and reads[below.fingerprint] > 1:
            return merge_filter(op)
        return op

    return circuit.rewrite(step)
