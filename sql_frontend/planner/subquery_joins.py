"""Semi-joins, anti-joins and left joins to a one-row-per-key relation, composed from the
operators that exist (Join, Distinct, Project, UnionAll, Difference).

Every function takes and returns logical plans whose columns are unique across their
inputs (``alias.column``). Subquery planning (``subqueries``) uses only these, so a
dedicated outer-join / semi-join builder can replace them here, in one place.

* ``semi_join``: L ⋉ R on equalities, bag semantics (each L row with its own
  multiplicity, once however many R rows match): L ⋈ Distinct(π_keys R).
* ``theta_semi_join``: L ⋉_θ R for any condition: Distinct(π_L(L ⋈_θ R)) joined back to
  L null-safely on all of L's columns (so L's duplicates keep their multiplicity).
* ``anti_join`` / ``theta_anti_join``: L joined back to its distinct keys (rows) minus
  those that match: L ⋈ (Distinct(π_k L) − π_k(Distinct(π_k L) ⋈ Distinct(π_k R))).
* ``left_join_unique``: L ⟕ A where A has at most one row per key: L's distinct keys
  joined to A, plus the unmatched keys padded with NULLs, joined back to L.

A Distinct's change is materialized once per epoch, so building on Distinct(π_k L)
rather than on L itself keeps the epoch's SQL linear in the number of stacked
subqueries (the Join/UnionAll/Difference changes are inlined where they are read).
* ``cross_join_one_row``: L × A where A has exactly one row (a global aggregate).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from ivm.operators.difference import Difference
from ivm.operators.distinct import Distinct
from ivm.operators.join import Join
from ivm.operators.project import Project
from ivm.operators.union_all import UnionAll
from ivm.plan.node import Plan
from ivm.schema import Schema
from ivm.sql_frontend.planner.context import Context
from ivm.sql_frontend.planner.naming import ref

Pairs = Sequence[tuple[exp.Expression, str]]
"""Equalities of a join: (expression over the left input, column of the right input)."""


def project(ctx: Context, plan: Plan, names: Sequence[str]) -> Plan:
    """``plan`` restricted to the columns ``names`` (in that order)."""
    if tuple(names) == tuple(plan.schema.names):
        return plan
    exprs = tuple((n, ref(n)) for n in names)
    return ctx.typed(Project(schema=plan.schema, input=plan, exprs=exprs))


def join(ctx: Context, left: Plan, right: Plan, condition: exp.Expression | None) -> Plan:
    """Inner join of two plans (None: cross product)."""
    columns = left.schema.columns + right.schema.columns
    return ctx.typed(Join(schema=Schema(columns), relations=(left, right), condition=condition))


def equalities(pairs: Pairs, null_safe: bool = False) -> exp.Expression | None:
    """The conjunction ``left = right`` (``IS NOT DISTINCT FROM`` when ``null_safe``)."""
    kind = exp.NullSafeEQ if null_safe else exp.EQ
    terms = [kind(this=e.copy(), expression=ref(c)) for e, c in pairs]
    return exp.and_(*terms) if terms else None


def _keys(ctx: Context, inner: Plan, pairs: Pairs) -> Plan:
    """Distinct(π_keys inner); a constant column when there are no keys (so the result
    has one row when ``inner`` has any, none otherwise)."""
    if pairs:
        exprs = tuple((c, ref(c)) for _, c in pairs)
    else:
        exprs = ((inner.schema.names[0] + "#any", exp.true()),)
    projected = ctx.typed(Project(schema=inner.schema, input=inner, exprs=exprs))
    return ctx.typed(Distinct(schema=projected.schema, input=projected))


def semi_join(ctx: Context, outer: Plan, inner: Plan, pairs: Pairs) -> Plan:
    """The rows of ``outer`` for which some row of ``inner`` satisfies every equality."""
    joined = join(ctx, outer, _keys(ctx, inner, pairs), equalities(pairs))
    return project(ctx, joined, outer.schema.names)


def anti_join(ctx: Context, outer: Plan, inner: Plan, pairs: Pairs) -> Plan:
    """The rows of ``outer`` for which no row of ``inner`` satisfies every equality: those
    whose key is among ``outer``'s distinct keys minus the keys ``inner`` has."""
    if not pairs:
        return subtract(ctx, outer, semi_join(ctx, outer, inner, pairs))
    keys, back = _outer_keys(ctx, outer, pairs)
    found = _keys(ctx, inner, pairs)
    hits = join(ctx, keys, found, equalities([(ref(k), c) for (_, c), k in
                                              zip(pairs, keys.schema.names, strict=True)]))
    absent = subtract(ctx, keys, project(ctx, hits, keys.schema.names))
    joined = join(ctx, outer, absent, equalities(back, null_safe=True))
    return project(ctx, joined, outer.schema.names)


def theta_semi_join(
    ctx: Context, outer: Plan, inner: Plan, condition: exp.Expression, prefix: str
) -> Plan:
    """The rows of ``outer`` for which some row of ``inner`` satisfies ``condition``;
    ``prefix`` names the matched copies of ``outer``'s columns apart from them."""
    matched = _matched(ctx, outer, inner, condition, prefix)
    return _back(ctx, outer, matched, prefix)


def theta_anti_join(
    ctx: Context, outer: Plan, inner: Plan, condition: exp.Expression, prefix: str
) -> Plan:
    """The rows of ``outer`` for which no row of ``inner`` satisfies ``condition``: the
    distinct rows of ``outer`` minus those that match, joined back to ``outer``."""
    matched = _matched(ctx, outer, inner, condition, prefix)
    exprs = tuple((f"{prefix}{n}", ref(n)) for n in outer.schema.names)
    renamed = ctx.typed(Project(schema=outer.schema, input=outer, exprs=exprs))
    rows = ctx.typed(Distinct(schema=renamed.schema, input=renamed))
    return _back(ctx, outer, subtract(ctx, rows, matched), prefix)


def _back(ctx: Context, outer: Plan, rows: Plan, prefix: str) -> Plan:
    """The rows of ``outer`` equal (null-safely) to one of ``rows`` (``outer``'s columns,
    renamed ``prefix + name``, each row once)."""
    pairs = [(ref(n), f"{prefix}{n}") for n in outer.schema.names]
    joined = join(ctx, outer, rows, equalities(pairs, null_safe=True))
    return project(ctx, joined, outer.schema.names)


def theta_matches(
    ctx: Context, outer: Plan, inner: Plan, condition: exp.Expression, prefix: str, flag: str
) -> tuple[Plan, Pairs]:
    """One row per distinct ``outer`` row with a match in ``inner`` under ``condition``:
    its columns renamed ``prefix + name`` and ``flag`` TRUE, with the null-safe pairs that
    join it back to ``outer`` (for ``left_join_unique``)."""
    matched = _matched(ctx, outer, inner, condition, prefix)
    exprs = tuple((n, ref(n)) for n in matched.schema.names) + ((flag, exp.true()),)
    flagged = ctx.typed(Project(schema=matched.schema, input=matched, exprs=exprs))
    return flagged, [(ref(n), f"{prefix}{n}") for n in outer.schema.names]


def _matched(
    ctx: Context, outer: Plan, inner: Plan, condition: exp.Expression, prefix: str
) -> Plan:
    """Distinct(π_outer(outer ⋈_condition inner)), columns renamed ``prefix + name``."""
    joined = join(ctx, outer, inner, condition)
    exprs = tuple((f"{prefix}{n}", ref(n)) for n in outer.schema.names)
    renamed = ctx.typed(Project(schema=joined.schema, input=joined, exprs=exprs))
    return ctx.typed(Distinct(schema=renamed.schema, input=renamed))


def subtract(ctx: Context, left: Plan, right: Plan) -> Plan:
    """``left`` minus ``right`` (a sub-bag of it)."""
    return ctx.typed(Difference(schema=left.schema, minuend=left, subtrahend=right))


def _outer_keys(ctx: Context, outer: Plan, pairs: Pairs) -> tuple[Plan, Pairs]:
    """Distinct(π_keys outer), a column ``<inner column>#o`` per pair, and the null-safe
    pairs joining ``outer`` back to it."""
    exprs = tuple((f"{c}#o", e.copy()) for e, c in pairs)
    projected = ctx.typed(Project(schema=outer.schema, input=outer, exprs=exprs))
    keys = ctx.typed(Distinct(schema=projected.schema, input=projected))
    return keys, [(e, f"{c}#o") for e, c in pairs]


def left_join_unique(
    ctx: Context, outer: Plan, inner: Plan, pairs: Pairs, null_safe: bool = False
) -> Plan:
    """``outer`` LEFT JOIN ``inner`` on the equalities, where ``inner`` has at most one row
    per key: every row of ``outer`` once, with its match's columns or NULLs.

    Built on ``outer``'s distinct keys K (a Distinct: its change is computed once):
    (K ⋈ inner) ⊎ pad(K − π_K(K ⋈ inner)) has one row per key of ``outer``, which
    ``outer`` then joins null-safely. ``outer`` is read once, so stacked left joins stay
    linear in size."""
    keys, back = _outer_keys(ctx, outer, pairs)
    inner_pairs = [(ref(k), c) for (_, c), k in zip(pairs, keys.schema.names, strict=True)]
    matched = join(ctx, keys, inner, equalities(inner_pairs, null_safe))
    unmatched = subtract(ctx, keys, project(ctx, matched, keys.schema.names))
    pads = tuple(
        (c.name, exp.cast(exp.null(), c.type, dialect="duckdb")) for c in inner.schema.columns
    )
    exprs = tuple((n, ref(n)) for n in keys.schema.names) + pads
    padded = ctx.typed(Project(schema=unmatched.schema, input=unmatched, exprs=exprs))
    extended = ctx.typed(UnionAll(schema=matched.schema, parts=(matched, padded)))
    joined = join(ctx, outer, extended, equalities(back, null_safe=True))
    names = list(outer.schema.names) + list(inner.schema.names)
    return project(ctx, joined, names)


def cross_join_one_row(ctx: Context, outer: Plan, inner: Plan) -> Plan:
    """``outer`` × ``inner``, where ``inner`` always has exactly one row."""
    return join(ctx, outer, inner, None)
