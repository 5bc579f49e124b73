"""Rewrite n-way joins into left-deep binary joins, each on the equi-keys between its two sides.

A partitioned executor co-locates a join's inputs by one key. An n-way join
``o ⋈ c ON o.c = c.id ⋈ p ON o.p = p.id`` has no single key, but the binary
joins ``(o ⋈ c) ⋈ p`` each have one: ``o.c = c.id``, then ``o.p = p.id``.
The rewrite keeps the meaning (inner joins are associative and commutative);
the result's columns are put back in the original order by a projection.

Order: start from the first relation, then repeatedly take the first remaining
relation that some equality connects to what is joined so far (a cross product
only when none is). Each conjunct of the condition is placed at the first join
where all of its columns are available.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from ivm.plan.nodes import Aggregate, Distinct, Filter, Join, Plan, Project, Scan, UnionAll
from ivm.schema import Schema


def binary_joins(plan: Plan) -> Plan:
    """``plan`` with every join of more than two inputs split into binary joins.

    A filter right above a join joins it first (``FROM a, b WHERE a.k = b.k`` is an
    inner join on ``a.k = b.k``), so equalities written in WHERE become join keys too.
    """
    rebuilt: dict[int, Plan] = {}
    for node in plan.walk():
        if isinstance(node, Filter) and isinstance(node.input, Join):
            join = node.input
            new: Plan = Join(
                schema=join.schema,
                relations=tuple(rebuilt[id(r)] for r in join.relations),
                condition=_and(_conjuncts(join.condition) + _conjuncts(node.predicate)),
            )
        else:
            new = _with_inputs(node, tuple(rebuilt[id(child)] for child in node.inputs))
        if isinstance(new, Join) and len(new.relations) > 2:
            new = _split(new)
        rebuilt[id(node)] = new
    return rebuilt[id(plan)]


def _with_inputs(node: Plan, inputs: tuple[Plan, ...]) -> Plan:
    if all(a is b for a, b in zip(inputs, node.inputs, strict=True)):
        return node
    if isinstance(node, (Filter, Project, Aggregate, Distinct)):
        return _replace(node, input=inputs[0])
    if isinstance(node, Join):
        return _replace(node, relations=inputs)
    if isinstance(node, UnionAll):
        return _replace(node, parts=inputs)
    assert isinstance(node, Scan)  # pragma: no cover - scans have no inputs
    return node  # pragma: no cover


def _replace(node: Plan, **changes: object) -> Plan:
    return replace(node, **changes)  # type: ignore[arg-type]


def _conjuncts(condition: exp.Expression | None) -> list[exp.Expression]:
    """The terms of a conjunction, however its ANDs are nested or parenthesized."""
    if condition is None:
        return []
    while isinstance(condition, exp.Paren):
        condition = condition.this
    if isinstance(condition, exp.And):
        return _conjuncts(condition.this) + _conjuncts(condition.expression)
    return [condition]


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


def _and(conjuncts: list[exp.Expression]) -> exp.Expression | None:
    if not conjuncts:
        return None
    result = conjuncts[0]
    for conjunct in conjuncts[1:]:
        result = exp.And(this=result, expression=conjunct)
    return result


def _split(join: Join) -> Plan:
    remaining = list(join.relations)
    pending = _conjuncts(join.condition)
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
        joined = Join(schema=schema, relations=(joined, relation), condition=_and(placed))
    if joined.schema.names == join.schema.names:
        return joined
    exprs = tuple(
        (name, exp.Column(this=exp.Identifier(this=name, quoted=True)))
        for name in join.schema.names
    )
    return Project(schema=join.schema, input=joined, exprs=exprs)
