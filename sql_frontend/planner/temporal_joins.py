"""``[LEFT] JOIN r FOR SYSTEM_TIME AS OF PROCTIME() ON …``: a processing-time temporal join.

Everything before the join is its left input, made a ``Differentiate`` (its changes as
arrivals and departures); the join is a ``TemporalJoin`` under an ``Integrate`` (see
``ivm.operators.temporal_join`` for the meaning: each left row locks in ``r`` as it was
when the row arrived).
"""

from __future__ import annotations

from sqlglot import exp

from ivm.errors import UnsupportedSQL
from ivm.operators.temporal_join import Differentiate, Integrate, TemporalJoin
from ivm.plan.node import Plan
from ivm.schema import Schema
from ivm.sql_frontend.planner.context import Context


def is_temporal_join(node: exp.Expression) -> bool:
    """True for a table read ``FOR SYSTEM_TIME AS OF PROCTIME()`` as a join's right side."""
    version = node.args.get("version") if isinstance(node, exp.Table) else None
    if version is None or not isinstance(node.parent, exp.Join):
        return False
    when = version.args.get("expression")
    return isinstance(when, exp.Anonymous) and when.name.upper() == "PROCTIME" and not (
        when.expressions
    )


def temporal_join(
    ctx: Context, join: exp.Join, left: Plan, right: Plan, condition: exp.Expression | None
) -> Plan:
    """``left`` [LEFT] JOIN ``right`` FOR SYSTEM_TIME AS OF PROCTIME() ON ``condition``."""
    side = (join.args.get("side") or "").upper()
    kind = (join.args.get("kind") or "").upper()
    if side not in ("", "LEFT") or kind not in ("", "INNER", "OUTER"):
        construct = " ".join(w for w in (side, kind) if w) + " JOIN … FOR SYSTEM_TIME"
        raise UnsupportedSQL(
            f"{ctx.locator.describe(construct, join)} is not supported: a temporal join is "
            "a JOIN or a LEFT JOIN"
        )
    arrivals = ctx.typed(Differentiate(schema=left.schema, input=left))
    schema = Schema((*left.schema.columns, *right.schema.columns))
    locked = ctx.typed(TemporalJoin(
        schema=schema, left=arrivals, right=right, condition=condition, outer=side == "LEFT"
    ))
    return ctx.typed(Integrate(schema=locked.schema, input=locked))
