"""Queries as a whole: SELECT or set operation, parenthesized queries, and making a plan's
columns match a target (set operations, the view's own names and types)."""

from __future__ import annotations

from sqlglot import exp

from ivm.errors import SqlError, UnsupportedSQL
from ivm.operators.distinct import Distinct
from ivm.operators.project import Project
from ivm.operators.set_operation import SetOperation
from ivm.operators.union_all import UnionAll
from ivm.plan.node import Plan, plain_sql
from ivm.plan.sql import union_all_sql
from ivm.schema import Schema
from ivm.sql_frontend.planner.context import Context, Scope
from ivm.sql_frontend.planner.ctes import with_ctes
from ivm.sql_frontend.planner.naming import ref
from ivm.sql_frontend.planner.select import plan_select
from ivm.sql_frontend.planner.top_k import limited, ordering_of
from ivm.sql_frontend.planner.values import plan_values


def plan_node(ctx: Context, node: exp.Expression, scope: Scope) -> Plan:
    """Plan a query node: a SELECT, a set operation or a parenthesized query."""
    if isinstance(node, exp.Subquery):
        return plan_node(ctx, node.this, scope)
    if isinstance(node, exp.SetOperation):
        return plan_set_operation(ctx, node, scope)
    if isinstance(node, exp.Select):
        return plan_select(ctx, node, scope)
    if isinstance(node, exp.Values):
        return plan_values(ctx, node)
    construct = node.key.upper()
    raise UnsupportedSQL(f"{ctx.locator.describe(construct, node)} is not supported as a query")


def plan_set_operation(ctx: Context, node: exp.SetOperation, scope: Scope) -> Plan:
    """UNION [ALL] [BY NAME], INTERSECT [ALL] or EXCEPT [ALL] of both sides, with DuckDB's
    unified column types. UNION is UNION ALL and a Distinct; INTERSECT and EXCEPT are one
    ``SetOperation`` (sqlglot's tree already has DuckDB's precedence: INTERSECT binds
    tighter than UNION and EXCEPT, which associate to the left)."""
    scope = with_ctes(ctx, node, scope)
    left = ctx.query(node.left, scope)
    right = ctx.query(node.right, scope)
    name = _operation(node)
    distinct = bool(node.args.get("distinct"))
    if node.args.get("by_name"):
        left, right = by_name(ctx, left, right)
    elif len(left.schema) != len(right.schema):
        raise SqlError(
            f"{ctx.locator.describe(name, node)}: both sides must have the same number "
            "of columns"
        )
    # DuckDB unifies the two sides' types (INTEGER ∪ DECIMAL → DECIMAL); so do we.
    target = ctx.describe(union_all_sql([plain_sql(left), plain_sql(right)]))
    parts = tuple(conform(ctx, p, target) for p in (left, right))
    if name != "UNION":
        operation = name if distinct else f"{name} ALL"
        result = ctx.typed(SetOperation(schema=target, left=parts[0], right=parts[1],
                                        operation=operation))
    else:
        result = ctx.typed(UnionAll(schema=target, parts=parts))
        if distinct:
            result = ctx.typed(Distinct(schema=result.schema, input=result))
    outputs = [(n, ref(n)) for n in result.schema.names]
    return limited(ctx, result, ordering_of(ctx, node, outputs, can_hide=False))


def _operation(node: exp.SetOperation) -> str:
    if isinstance(node, exp.Intersect):
        return "INTERSECT"
    if isinstance(node, exp.Except):
        return "EXCEPT"
    return "UNION"


def by_name(ctx: Context, left: Plan, right: Plan) -> tuple[Plan, Plan]:
    """Both sides with the columns of UNION BY NAME, as DuckDB orders them: the left's,
    then the right's that the left lacks (names compared case-insensitively); a side
    lacking a column gives NULL of the other side's type there."""
    columns: dict[str, tuple[str, str]] = {}
    for plan in (left, right):
        for c in plan.schema.columns:
            columns.setdefault(c.name.lower(), (c.name, c.type))

    def widened(plan: Plan) -> Plan:
        own = {c.name.lower(): c.name for c in plan.schema.columns}
        exprs = tuple(
            (name, ref(own[key]) if key in own
             else exp.cast(exp.null(), type_, dialect="duckdb"))
            for key, (name, type_) in columns.items()
        )
        return ctx.typed(Project(schema=plan.schema, input=plan, exprs=exprs))

    return widened(left), widened(right)


def conform(ctx: Context, plan: Plan, target: Schema) -> Plan:
    """``plan`` with ``target``'s column names and types."""
    if plan.schema == target:
        return plan
    exprs = tuple(
        (t.name, exp.cast(ref(c.name), t.type, dialect="duckdb"))
        for c, t in zip(plan.schema.columns, target.columns, strict=True)
    )
    return ctx.typed(Project(schema=target, input=plan, exprs=exprs))
