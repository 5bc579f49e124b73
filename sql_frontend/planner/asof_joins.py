"""ASOF [LEFT] JOIN (DuckDB's event-time join): equality keys plus exactly one inequality.

The ON condition is split into ``left = right`` key pairs and one comparison of a left
column with a right column (``>=``, ``>``, ``<=``, ``<``, either way round: it is
normalized to ``left op right``). ``USING (k…, t)``, which the ``qualify`` rule turns
into equalities, compares its last column with ``>=``, as DuckDB does.
"""

from __future__ import annotations

from sqlglot import exp

from ivm.errors import UnsupportedSQL
from ivm.operators.asof_join import FLIPPED, AsOfJoin
from ivm.operators.join import conjuncts
from ivm.plan.node import Plan
from ivm.schema import Schema
from ivm.sql_frontend.planner.context import Context

COMPARISONS: dict[type[exp.Expression], str] = {
    exp.GTE: ">=", exp.GT: ">", exp.LTE: "<=", exp.LT: "<",
}


def asof_join(
    ctx: Context, join: exp.Join, left: Plan, right: Plan, condition: exp.Expression | None
) -> Plan:
    """``left`` ASOF [LEFT] JOIN ``right`` ON ``condition`` (columns renamed ``alias.col``)."""
    side = (join.args.get("side") or "").upper()
    where = ctx.locator.describe("ASOF JOIN", join)
    if side not in ("", "LEFT"):
        raise UnsupportedSQL(f"{where}: ASOF {side} JOIN is not supported (ASOF LEFT JOIN is)")
    lefts, rights = set(left.schema.names), set(right.schema.names)
    keys: list[tuple[str, str]] = []
    times: list[tuple[str, str, str]] = []
    for term in conjuncts(condition):
        pair = _columns(term, lefts, rights)
        if pair is None:
            raise UnsupportedSQL(
                f"{where}: its condition may only compare a left column with a right column "
                f"(equalities, and one of >=, >, <=, <), not {term.sql(dialect='duckdb')}"
            )
        a, b, flipped = pair
        if isinstance(term, exp.EQ):
            keys.append((a, b))
        elif type(term) in COMPARISONS:
            op = COMPARISONS[type(term)]
            times.append((a, FLIPPED[op] if flipped else op, b))
        else:
            raise UnsupportedSQL(f"{where}: {term.sql(dialect='duckdb')} is not supported")
    if not times and keys:  # USING (…, t): DuckDB refuses ON without an inequality
        a, b = keys.pop()
        times.append((a, ">=", b))
    if len(times) != 1:
        raise UnsupportedSQL(f"{where} needs exactly one inequality (>=, >, <=, <) in ON")
    (left_time, op, right_time), = times
    schema = Schema((*left.schema.columns, *right.schema.columns))
    return ctx.typed(AsOfJoin(
        schema=schema, left=left, right=right, keys=tuple(keys), left_time=left_time, op=op,
        right_time=right_time, outer=side == "LEFT",
    ))


def _columns(
    term: exp.Expression, lefts: set[str], rights: set[str]
) -> tuple[str, str, bool] | None:
    """(left column, right column, whether the term names them right first), or None."""
    if not isinstance(term, (exp.EQ, *COMPARISONS)):
        return None
    a, b = term.left, term.right
    if not (isinstance(a, exp.Column) and isinstance(b, exp.Column)):
        return None
    if a.name in lefts and b.name in rights:
        return a.name, b.name, False
    if a.name in rights and b.name in lefts:
        return b.name, a.name, True
    return None
