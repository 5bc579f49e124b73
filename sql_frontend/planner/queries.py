"""Queries as a whole: SELECT or set operation, parenthesized queries, and making a plan's
columns match a target (set operations, the view's own names and types)."""

from __future__ import annotations

from sqlglot import exp

from ivm.errors import SqlError, UnsupportedSQL
from ivm.operators.distinct import Distinct
from ivm.operators.project import Project
from ivm.operators.union_all import UnionAll
from ivm.plan.node import Plan, plain_sql
from ivm.plan.sql import union_all_sql
from ivm.schema import Schema
from ivm.sql_frontend.planner.context import Context, Scope
from ivm.sql_frontend.planner.ctes import with_ctes
from ivm.sql_frontend.planner.naming import ref
from ivm.sql_frontend.planner.select import plan_select


def plan_node(ctx: Context, node: exp.Expression, scope: Scope) -> Plan:
    """Plan a query node: a SELECT, a UNION [ALL] or a parenthesized query."""
    if isinstance(node, exp.Subquery):
        return plan_node(ctx, node.this, scope)
    if isinstance(node, exp.Union):
        return plan_union(ctx, node, scope)
    if isinstance(node, exp.Select):
        return plan_select(ctx, node, scope)
    construct = type(node).__name__
    raise UnsupportedSQL(f"{ctx.locator.describe(construct, node)} is not supported as a query")


def plan_union(ctx: Context, node: exp.Union, scope: Scope) -> Plan:
    """UNION ALL of both sides with DuckDB's unified column types; UNION adds a Distinct."""
    scope = with_ctes(ctx, node, scope)
    left = ctx.query(node.left, scope)
    right = ctx.query(node.right, scope)
    if len(left.schema) != len(right.schema):
        raise SqlError(
            f"{ctx.locator.describe('UNION', node)}: both sides must have the same number "
            "of columns"
        )
    # DuckDB unifies the two sides' types (INTEGER ∪ DECIMAL → DECIMAL); so do we.
    target = ctx.describe(union_all_sql([plain_sql(left), plain_sql(right)]))
    parts = tuple(conform(ctx, p, target) for p in (left, right))
    result = ctx.typed(UnionAll(schema=target, parts=parts))
    if node.args.get("distinct"):
        result = ctx.typed(Distinct(schema=result.schema, input=result))
    return result


def conform(ctx: Context, plan: Plan, target: Schema) -> Plan:
    """``plan`` with ``target``'s column names and types."""
    if plan.schema == target:
        return plan
    exprs = tuple(
        (t.name, exp.cast(ref(c.name), t.type, dialect="duckdb"))
        for c, t in zip(plan.schema.columns, target.columns, strict=True)
    )
    return ctx.typed(Project(schema=target, input=plan, exprs=exprs))
