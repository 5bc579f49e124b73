"""LEFT, RIGHT and FULL OUTER JOIN as inner join plus NULL-padded anti joins.

    L ⟕_θ R = (L ⋈_θ R) ⊎ pad_R(L ▷_θ R)
    L ⟖_θ R = (L ⋈_θ R) ⊎ pad_L(R ▷_θ L)
    L ⟗_θ R = (L ⋈_θ R) ⊎ pad_R(L ▷_θ R) ⊎ pad_L(R ▷_θ L)

where pad_X gives X's columns NULL (typed as X's). The anti joins come from
``semi_joins``: an L row is padded exactly while the count of R rows matching
it is zero, which the Distinct below the semi join tracks by key. The inner
join and the anti join read the same L and R plan nodes, so their operators and
traces are shared. Columns are L's then R's (``alias.column``), as for an inner
join; a WHERE above is evaluated on the padded rows.
"""

from __future__ import annotations

from sqlglot import exp

from ivm.operators.project import Project
from ivm.operators.union_all import UnionAll
from ivm.plan.node import Plan
from ivm.schema import Schema
from ivm.sql_frontend.planner.context import Context
from ivm.sql_frontend.planner.naming import ref
from ivm.sql_frontend.planner.semi_joins import anti_join, join, semi_join

SIDES = ("LEFT", "RIGHT", "FULL")


def outer_join(
    ctx: Context, side: str, left: Plan, right: Plan, condition: exp.Expression | None
) -> Plan:
    """``left`` ``side`` JOIN ``right`` ON ``condition`` (side: LEFT, RIGHT or FULL)."""
    inner = join(ctx, left, right, condition)
    parts = [inner]
    if side in ("LEFT", "FULL"):
        parts.append(pad(ctx, anti_join(ctx, left, right, condition), inner.schema))
    if side in ("RIGHT", "FULL"):
        parts.append(pad(ctx, anti_join(ctx, right, left, condition), inner.schema))
    return ctx.typed(UnionAll(schema=inner.schema, parts=tuple(parts)))


def semi_or_anti(
    ctx: Context, kind: str, left: Plan, right: Plan, condition: exp.Expression | None
) -> Plan:
    """``left SEMI JOIN right`` or ``left ANTI JOIN right`` (DuckDB's syntax)."""
    build = semi_join if kind == "SEMI" else anti_join
    return build(ctx, left, right, condition)


def pad(ctx: Context, rows: Plan, target: Schema) -> Plan:
    """``rows`` (some of ``target``'s columns) with ``target``'s other columns NULL, in
    ``target``'s order and types."""
    present = set(rows.schema.names)
    exprs = tuple(
        (
            c.name,
            ref(c.name)
            if c.name in present
            else exp.cast(exp.null(), c.type, dialect="duckdb"),
        )
        for c in target.columns
    )
    return ctx.typed(Project(schema=target, input=rows, exprs=exprs))
