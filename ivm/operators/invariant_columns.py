"""Columns a recursion's step never changes: what a partitioned fixed point is split by.

A column of a recursive CTE is *invariant* when every row the step derives carries,
in that column, the value of the working-table row it was derived from: a transitive
closure's source (``SELECT tc.src, e.dst FROM tc JOIN edges e ON tc.dst = e.src``).
Then rows with different values in it never meet: a partition holding the anchor's
rows of some values (and a whole copy of what the step imports) iterates to exactly
the result's rows of those values, apart from every other partition.

Found conservatively: the step reads the CTE once, and the column reaches the step's
output at its own position through projections that pass it as it is, filters,
DISTINCT and joins only. Anything else (an aggregate, a union, the CTE read twice, a
computed value) gives no invariant column, and the fixed point runs in one place.
"""

from __future__ import annotations

from sqlglot import exp

from ivm.operators.distinct import Distinct
from ivm.operators.filter import Filter
from ivm.operators.join import Join
from ivm.operators.project import Project
from ivm.operators.recursive import Feedback, Recursive
from ivm.plan.node import Plan


def invariant_positions(recursive: Recursive) -> tuple[int, ...]:
    """Positions of the CTE's columns that its step passes through unchanged."""
    step = recursive.step.plan
    references = sum(
        isinstance(child, Feedback) for node in step.walk() for child in node.children()
    ) + isinstance(step, Feedback)
    if references != 1:
        return ()
    names = step.schema.names
    found = []
    for position, name in enumerate(names):
        origin = _origin(step, name)
        if origin is not None and origin[1] == origin[0].schema.names[position]:
            found.append(position)
    return tuple(found)


def _origin(node: Plan, column: str) -> tuple[Feedback, str] | None:
    """The working-table column that ``column`` of ``node`` is, unchanged; None if none."""
    while True:
        if isinstance(node, Feedback):
            return node, column
        if isinstance(node, Project):
            expression = dict(node.exprs).get(column)
            if not isinstance(expression, exp.Column) or expression.table:
                return None
            column, node = expression.name, node.input
        elif isinstance(node, (Filter, Distinct)):
            node = node.input
        elif isinstance(node, Join):
            owners = [r for r in node.relations if column in r.schema.names]
            if len(owners) != 1:
                return None
            node = owners[0]
        else:
            return None
