"""The one pass from a logical plan to its incremental circuit, by DBSP's rules.

Linear operators (filter, project, UNION ALL) apply to changes as they are; an
inner join becomes a delta query over its inputs' integrals; GROUP BY and
DISTINCT keep a trace and emit only what changed. A plan node used twice (a CTE)
becomes one operator read twice.
"""

from __future__ import annotations

from ivm.circuit.circuit import (
    Circuit,
    DeltaJoin,
    IncrementalAggregate,
    IncrementalDistinct,
    Linear,
    Operator,
    Source,
)
from ivm.operators.aggregate import AggregateShape
from ivm.plan.nodes import Aggregate, Distinct, Filter, Join, Plan, Project, Scan, UnionAll


def incrementalize(plan: Plan, view: str) -> Circuit:
    """Turn a logical plan into its incremental circuit (DBSP's rules, one pass)."""
    operators: list[Operator] = []
    by_node: dict[int, Operator] = {}
    for node in plan.walk():
        inputs = tuple(by_node[id(child)] for child in node.inputs)
        index = len(operators)
        op: Operator
        if isinstance(node, Scan):
            op = Source(index, node, inputs, name=node.name)
        elif isinstance(node, (Filter, Project, UnionAll)):
            op = Linear(index, node, inputs)
        elif isinstance(node, Join):
            op = DeltaJoin(index, node, inputs)
        elif isinstance(node, Aggregate):
            shape = AggregateShape(
                keys=node.keys, calls=node.calls, output=node.schema, arguments=node.input.schema
            )
            op = IncrementalAggregate(index, node, inputs, shape=shape)
        elif isinstance(node, Distinct):
            op = IncrementalDistinct(index, node, inputs)
        else:  # pragma: no cover - the planner builds only the nodes above
            raise TypeError(f"cannot incrementalize {type(node).__name__}")
        operators.append(op)
        by_node[id(node)] = op
    return Circuit(view=view, operators=tuple(operators))
