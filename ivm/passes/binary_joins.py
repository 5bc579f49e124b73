"""Pass: n-way joins become left-deep binary joins, each on the equi-keys between its sides.

A partitioned executor co-locates a join's inputs by one key. An n-way join
``o ⋈ c ON o.c = c.id ⋈ p ON o.p = p.id`` has no single key, but the binary
joins ``(o ⋈ c) ⋈ p`` each have one: ``o.c = c.id``, then ``o.p = p.id``.
The rewrite keeps the meaning (inner joins are associative and commutative);
the result's columns are put back in the original order by a projection.

A filter right above a join joins it first (``FROM a, b WHERE a.k = b.k`` is an
inner join on ``a.k = b.k``), so equalities written in WHERE become join keys too.

Order: start from the first relation, then repeatedly take the first remaining
relation that some equality connects to what is joined so far (a cross product
only when none is). Each conjunct of the condition is placed at the first join
where all of its columns are available.

Only partitioned execution (Spark mode) asks for it: embedded mode keeps the
n-way delta query, which needs no intermediate state.
"""

from __future__ import annotations

from sqlglot import exp

from ivm.circuit.circuit import Circuit
from ivm.operators.base import Operator
from ivm.operators.filter import Filter
from ivm.operators.join import DeltaJoin, Join, conjuncts
from ivm.operators.project import Project, ProjectOperator
from ivm.schema import Schema


def binary_joins(circuit: Circuit, partitioned: bool = False) -> Circuit:
    """``circuit`` with every join of more than two inputs split into binary joins
    (only when ``partitioned``: the rewrite serves partitioned execution)."""
    if not partitioned:
        return circuit
    return circuit.rewrite(merge_filter).rewrite(_split_wide)


def merge_filter(op: Operator) -> Operator:
    """A filter right above a join, as the join's condition."""
    if isinstance(op.node, Filter) and isinstance(op.inputs[0], DeltaJoin):
        join = op.inputs[0].join
        merged = Join(
            schema=join.schema,
            relations=join.relations,
            condition=_and(conjuncts(join.condition) + conjuncts(op.node.predicate)),
        )
        return DeltaJoin(merged, op.inputs[0].inputs)
    return op


def _split_wide(op: Operator) -> Operator:
    return _split(op) if isinstance(op, DeltaJoin) and len(op.inputs) > 2 else op


def _columns(expression: exp.Expression) -> set[str]:
    return {c.name for c in expression.find_all(exp.Column)}


def _equates(conjunct: exp.Expression, left: set[str], right: set[str]) -> bool:
    """True when ``conjunct`` is ``a = b`` with one column on each side."""
    if not isinstance(conjunct, exp.EQ):
        return False
    sides = (conjunct.left, conjunct.right)
    if not all(isinstance(s, exp.Column) for s in sides):
        return False
    names = {conjunct.left.name, conjunct.right.name}
    return bool(names & left) and bool(names & right)


def _and(terms: list[exp.Expression]) -> exp.Expression | None:
    """The conjunction of ``terms``; an OR among them is parenthesized (``conjuncts``
    strips parentheses, and ``a AND (b OR c)`` must not become ``a AND b OR c``)."""
    if not terms:
        return None
    return exp.and_(*terms) if len(terms) > 1 else terms[0]


def _split(op: DeltaJoin) -> Operator:
    remaining = list(op.inputs)
    pending = conjuncts(op.join.condition)
    joined = remaining.pop(0)
    while remaining:
        have = set(joined.schema.names)
        position = next(
            (
                i
                for i, relation in enumerate(remaining)
                if any(_equates(c, have, set(relation.schema.names)) for c in pending)
            ),
            0,
        )
        relation = remaining.pop(position)
        available = have | set(relation.schema.names)
        placed = [c for c in pending if _columns(c) <= available]
        pending = [c for c in pending if not _columns(c) <= available]
        schema = Schema(joined.schema.columns + relation.schema.columns)
        node = Join(schema=schema, relations=(joined.node, relation.node), condition=_and(placed))
        joined = DeltaJoin(node, (joined, relation))
    if joined.schema.names == op.schema.names:
        return joined
    exprs = tuple(
        (name, exp.Column(this=exp.Identifier(this=name, quoted=True))) for name in op.schema.names
    )
    project = Project(schema=op.schema, input=joined.node, exprs=exprs)
    return ProjectOperator(project, (joined,))
