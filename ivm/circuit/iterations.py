"""Iteration tagging: a recursion's step over all its iterations at once.

DuckDB evaluates a recursive step on one working table Wⱼ at a time. Tagging
each working-table row with its iteration ``__ivm_iter`` turns "step(Wⱼ) for every
j" into one relational expression over the tagged rows ⊎ⱼ Wⱼ × {j}: every node
that reads the recursion carries ``__ivm_iter`` through, so rows of different
iterations never meet:

* filters, projections, flat maps, UNION ALL, DISTINCT, guards: ``__ivm_iter`` is one
  more column;
* a join of several tagged inputs also equates their ``__ivm_iter`` (Wⱼ ⋈ Wⱼ, never
  Wⱼ ⋈ Wₖ); an untagged input (an import) joins every iteration alike;
* GROUP BY groups by ``__ivm_iter`` too; INTERSECT / EXCEPT and bag difference need
  both sides tagged.

Then the ordinary incremental operators maintain step(W) as the tagged rows
change, which is what the fixed-point operator (``ivm.operators.fixed_point``)
needs. Anything else that reads the recursion raises ``NotIterable``.
"""

from __future__ import annotations

import dataclasses

from sqlglot import exp

from ivm.operators.aggregate import Aggregate
from ivm.operators.difference import Difference
from ivm.operators.distinct import Distinct
from ivm.operators.filter import Filter
from ivm.operators.flat_map import FlatMap
from ivm.operators.guard import Guard
from ivm.operators.join import Join
from ivm.operators.project import Project
from ivm.operators.recursive import ITER, ITER_COLUMN, Feedback, Imported, tagged_schema
from ivm.operators.set_operation import SetOperation
from ivm.operators.union_all import UnionAll
from ivm.plan.node import Plan
from ivm.schema import Column, Schema


class NotIterable(Exception):
    """A step reads its recursion through a construct that cannot be split by iteration;
    ``construct`` names it in the user's terms."""

    def __init__(self, construct: str) -> None:
        super().__init__(construct)
        self.construct = construct


def column(name: str) -> exp.Column:
    """A reference to column ``name``."""
    return exp.Column(this=exp.Identifier(this=name, quoted=True))


def tag_iterations(step: Plan) -> Plan:
    """``step`` (over ``Feedback`` and ``Imported`` leaves) with every node that reads the
    feedback carrying ``__ivm_iter`` as its last column (see the module docstring)."""
    done: dict[int, tuple[Plan, bool]] = {}
    for node in step.walk():
        inputs = [done[id(c)] for c in node.children()]
        done[id(node)] = _tag(node, inputs)
    result, tagged = done[id(step)]
    if not tagged:
        raise NotIterable("a recursive step that does not read its CTE")
    return result


def _tag(node: Plan, inputs: list[tuple[Plan, bool]]) -> tuple[Plan, bool]:
    children = [plan for plan, _ in inputs]
    tags = [tagged for _, tagged in inputs]
    if isinstance(node, Feedback):
        schema = tagged_schema(node.schema)
        return dataclasses.replace(node, schema=schema, tagged=True), True
    if isinstance(node, Imported) or not any(tags):
        return node.with_children(children), False
    schema = tagged_schema(node.schema)
    if isinstance(node, (Filter, Distinct, Guard)):
        return dataclasses.replace(node.with_children(children), schema=schema), True
    if isinstance(node, Project):
        exprs = (*node.exprs, (ITER, column(ITER)))
        return Project(schema=schema, input=children[0], exprs=exprs), True
    if isinstance(node, Join):
        return _join(node, children, tags), True
    if isinstance(node, FlatMap):
        return _flat_map(node, children[0]), True
    if isinstance(node, Aggregate):
        return _aggregate(node, children[0]), True
    if isinstance(node, (UnionAll, SetOperation, Difference)):
        if not all(tags):
            raise NotIterable(_partly(node))
        return dataclasses.replace(node.with_children(children), schema=schema), True
    raise NotIterable(_construct(node))


def _join(node: Join, children: list[Plan], tags: list[bool]) -> Plan:
    """The join with each tagged input's ``__ivm_iter`` renamed apart and equated, then one
    ``__ivm_iter`` column after the join's own columns."""
    relations: list[Plan] = []
    names: list[str] = []
    for position, (child, tagged) in enumerate(zip(children, tags, strict=True)):
        if not tagged:
            relations.append(child)
            continue
        name = f"{ITER}{position}"
        names.append(name)
        exprs = tuple((c, column(c)) for c in child.schema.names if c != ITER)
        renamed = Schema((*child.schema.columns[:-1], Column(name, ITER_COLUMN.type)))
        relations.append(Project(schema=renamed, input=child, exprs=(*exprs, (name, column(ITER)))))
    equalities = [exp.EQ(this=column(names[0]), expression=column(n)) for n in names[1:]]
    parts = ([node.condition] if node.condition is not None else []) + equalities
    condition = exp.and_(*parts) if parts else None
    columns = tuple(c for r in relations for c in r.schema.columns)
    joined = Join(schema=Schema(columns), relations=tuple(relations), condition=condition)
    exprs = tuple((c, column(c)) for c in node.schema.names) + ((ITER, column(names[0])),)
    return Project(schema=tagged_schema(node.schema), input=joined, exprs=exprs)


def _flat_map(node: FlatMap, child: Plan) -> Plan:
    """The flat map of the tagged rows (each row's expansion keeps its iteration), the
    iteration moved after the expansion's columns."""
    width = len(node.input.schema)
    expanded = Schema((*child.schema.columns, *node.schema.columns[width:]))
    flat = dataclasses.replace(node.with_children([child]), schema=expanded)
    exprs = tuple((c, column(c)) for c in node.schema.names) + ((ITER, column(ITER)),)
    return Project(schema=tagged_schema(node.schema), input=flat, exprs=exprs)


def _aggregate(node: Aggregate, child: Plan) -> Plan:
    """GROUP BY the keys and ``__ivm_iter``, the iteration moved after the calls' columns.

    Without keys, DuckDB gives one row per iteration even when the aggregate's input is
    empty there; grouping by ``__ivm_iter`` gives a row only for iterations with input rows.
    The two agree when the input is the working table itself (never empty while the
    recursion runs), so only that form is accepted."""
    if not node.keys and not _is_working_table(node.input):
        raise NotIterable(
            "an aggregate without GROUP BY over a filtered or joined reference to the "
            "recursive CTE"
        )
    keys = (*node.keys, ITER)
    key_columns = [c for c in node.schema.columns[: len(node.keys)]]
    call_columns = list(node.schema.columns[len(node.keys) :])
    grouped = Aggregate(
        schema=Schema((*key_columns, ITER_COLUMN, *call_columns)),
        input=child,
        keys=keys,
        calls=node.calls,
    )
    exprs = tuple((c, column(c)) for c in node.schema.names) + ((ITER, column(ITER)),)
    return Project(schema=tagged_schema(node.schema), input=grouped, exprs=exprs)


def _is_working_table(node: Plan) -> bool:
    while isinstance(node, Project):
        node = node.input
    return isinstance(node, Feedback)


def _partly(node: Plan) -> str:
    if isinstance(node, UnionAll):
        return "a UNION ALL in the recursive step with a branch that does not read the CTE"
    if isinstance(node, SetOperation):
        return f"{node.operation} in the recursive step with a side that does not read the CTE"
    return "an anti join or NOT EXISTS whose outer side does not read the recursive CTE"


def _construct(node: Plan) -> str:
    names = {
        "TopK": "ORDER BY … LIMIT over the recursive CTE",
        "Window": "a window function over the recursive CTE",
        "DistinctOn": "DISTINCT ON over the recursive CTE",
    }
    return names.get(type(node).__name__, f"{type(node).__name__} over the recursive CTE")
