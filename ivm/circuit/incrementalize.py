"""The one pass from a logical plan to its incremental circuit, by DBSP's rules.

Each plan node becomes the operator its kind registers (``ivm.operators.registry``):
linear operators (filter, project, UNION ALL) apply to changes as they are; an
inner join becomes a delta query over its inputs' integrals; GROUP BY and
DISTINCT keep traces and emit only what changed; WITH RECURSIVE becomes a fixed
point whose step is a child circuit, incrementalized by this same pass. A plan
node used twice (a CTE), or two equal subplans, become one operator read twice.
"""

from __future__ import annotations

from ivm.circuit.circuit import Circuit
from ivm.circuit.iterations import tag_iterations
from ivm.operators.base import Describe, Operator
from ivm.operators.fixed_point import FixedPoint
from ivm.operators.recursive import Recursive
from ivm.operators.registry import operator_for
from ivm.plan.node import Plan


def incrementalize(plan: Plan, view: str, describe: Describe) -> Circuit:
    """Turn a logical plan into its incremental circuit (DBSP's rules, one pass).

    ``describe`` types the state of operators that need DuckDB to type it.
    """
    built: dict[int, Operator] = {}
    shared: dict[str, Operator] = {}
    for node in plan.walk():
        inputs = tuple(built[id(child)] for child in node.children())
        if isinstance(node, Recursive):
            # The step becomes a child circuit over its tagged working tables.
            child = incrementalize(tag_iterations(node.step.plan), view, describe)
            op: Operator = FixedPoint(node, inputs, child)
        else:
            op = operator_for(node, inputs, describe)
        built[id(node)] = shared.setdefault(op.fingerprint, op)
    return Circuit.of(view, built[id(plan)])
