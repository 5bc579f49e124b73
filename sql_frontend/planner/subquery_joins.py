"""The joins only subqueries need, built on ``semi_joins``' helpers from existing operators
(Join, Distinct, Project, UnionAll, Difference).

A subquery's correlation is a list of *pairs* (an expression over the outer plan, a
column of the decorrelated inner plan) and maybe a theta condition; ``condition`` makes
them one join condition. EXISTS / IN filters are ``semi_joins.semi_join`` /
``anti_join`` on it. Subqueries used as values need:

* ``left_join_unique``: L ⟕ A where A has at most one row per key: L's distinct keys
  joined to A, plus the unmatched keys padded with NULLs, joined back to L. A
  Distinct's change is materialized once per epoch, so building on Distinct(π_k L)
  rather than on L itself reads L once, and stacked value subqueries stay small;
* ``theta_matches``: the distinct L rows some inner row matches under a theta condition
  (``semi_joins.matched_rows``), flagged, for ``left_join_unique``;
* ``cross_join_one_row``: L × A where A has exactly one row (a global aggregate), the
  one-row relations of consecutive subqueries gathered in one ``Product``.

Every function takes and returns logical plans whose columns are unique across their
inputs (``alias.column``).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from ivm.operators.difference import Difference
from ivm.operators.distinct import Distinct
from ivm.operators.join import Join, conjuncts
from ivm.operators.product import Product
from ivm.operators.project import Project
from ivm.operators.union_all import UnionAll
from ivm.plan.node import Plan
from ivm.schema import Schema
from ivm.sql_frontend.planner.context import Context
from ivm.sql_frontend.planner.naming import ref
from ivm.sql_frontend.planner.semi_joins import and_all, join, matched_rows, project

Pairs = Sequence[tuple[exp.Expression, str]]
"""Equalities of a join: (expression over the left input, column of the right input)."""


def equalities(pairs: Pairs, null_safe: bool = False) -> exp.Expression | None:
    """The conjunction ``left = right`` (``IS NOT DISTINCT FROM`` when ``null_safe``)."""
    kind = exp.NullSafeEQ if null_safe else exp.EQ
    return and_all([kind(this=e.copy(), expression=ref(c)) for e, c in pairs])


def condition(pairs: Pairs, theta: exp.Expression | None) -> exp.Expression | None:
    """The join condition of a correlation: its equalities and its theta condition."""
    return and_all([equalities(pairs), theta])


def theta_matches(
    ctx: Context, outer: Plan, inner: Plan, on: exp.Expression, prefix: str, flag: str
) -> tuple[Plan, Pairs]:
    """One row per distinct value of the ``outer`` columns ``on`` reads that a row of
    ``inner`` matches under ``on``: those columns renamed ``prefix + name`` and ``flag``
    TRUE, with the null-safe pairs that join it back to ``outer`` (for
    ``left_join_unique``)."""
    matched, names = matched_rows(ctx, outer, inner, on, prefix)
    exprs = tuple((n, ref(n)) for n in matched.schema.names) + ((flag, exp.true()),)
    flagged = ctx.typed(Project(schema=matched.schema, input=matched, exprs=exprs))
    return flagged, [(ref(n), f"{prefix}{n}") for n in names]


def outer_keys(ctx: Context, outer: Plan, pairs: Pairs) -> tuple[Plan, Pairs]:
    """Distinct(π_keys outer), a column ``<inner column>#o`` per pair, and the null-safe
    pairs joining ``outer`` back to it."""
    exprs = tuple((f"{c}#o", e.copy()) for e, c in pairs)
    projected = ctx.typed(Project(schema=outer.schema, input=outer, exprs=exprs))
    keys = ctx.typed(Distinct(schema=projected.schema, input=projected))
    return keys, [(e, f"{c}#o") for e, c in pairs]


def outer_values(
    ctx: Context, outer: Plan, on: exp.Expression, prefix: str
) -> tuple[Plan, exp.Expression, Pairs]:
    """The distinct values of the columns of ``outer`` that the correlation ``on`` reads
    (Neumann and Kemper's "magic set" D, a Distinct), ``on`` rewritten over D instead of
    ``outer``, and the null-safe pairs joining ``outer`` back to D's columns renamed
    ``prefix<j>`` (``left_join_unique`` builds the same D from them, so it is one node).
    A subquery correlated by any condition is then computed once per distinct value:
    D ⋈_on inner, grouped or made distinct by D's columns."""
    read: dict[str, None] = {}
    for column in on.find_all(exp.Column):
        if column.name in outer.schema.names:
            read.setdefault(column.name, None)
    back: list[tuple[exp.Expression, str]] = [
        (ref(name), f"{prefix}{j}") for j, name in enumerate(read)
    ]
    keys, key_pairs = outer_keys(ctx, outer, back)
    renamed = {name: key for (_, key), name in zip(key_pairs, read, strict=True)}

    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and node.name in renamed:
            return ref(renamed[node.name], node)
        return node

    return keys, on.copy().transform(swap), back


def left_join_unique(
    ctx: Context, outer: Plan, inner: Plan, pairs: Pairs, null_safe: bool = False
) -> Plan:
    """``outer`` LEFT JOIN ``inner`` on the equalities, where ``inner`` has at most one row
    per key: every row of ``outer`` once, with its match's columns or NULLs.

    Built on ``outer``'s distinct keys K (a Distinct: its change is computed once):
    (K ⋈ inner) ⊎ pad(K − π_K(K ⋈ inner)) has one row per key of ``outer``, which
    ``outer`` then joins null-safely. ``outer`` is read once, so stacked left joins stay
    linear in size."""
    keys, back = outer_keys(ctx, outer, pairs)
    inner_pairs = [(ref(k), c) for (_, c), k in zip(pairs, keys.schema.names, strict=True)]
    matched = join(ctx, keys, inner, equalities(inner_pairs, null_safe))
    hits = project(ctx, matched, keys.schema.names)
    unmatched = ctx.typed(Difference(schema=keys.schema, minuend=keys, subtrahend=hits))
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
    """``outer`` × ``inner``, where ``inner`` always has exactly one row: ``outer`` joined
    to a ``Product`` of one-row relations. When ``outer`` is such a join already (the
    values of the subqueries before), ``inner`` joins its product instead: n uncorrelated
    subqueries make one product of n inputs under one join, whose SQL grows linearly
    with n (a chain of n binary joins re-reads every change below it at every level)."""
    if (
        isinstance(outer, Join) and outer.condition is None and len(outer.relations) == 2
        and isinstance(outer.relations[1], Product)
    ):
        base, product = outer.relations
        relations = (*product.relations, inner)
    else:
        base, relations = outer, (inner,)
    # Typed without asking DuckDB: a product's columns are its inputs' (describing each
    # growing product again would make planning quadratic in the number of subqueries).
    columns = tuple(c for r in relations for c in r.schema.columns)
    combined = Product(schema=Schema(columns), relations=relations)
    schema = Schema(base.schema.columns + columns)
    return Join(schema=schema, relations=(base, combined), condition=None)


def keyed_by_values(plan: Plan, predicate: exp.Expression) -> tuple[Plan, exp.Expression | None]:
    """``plan`` filtered by ``predicate`` (renamed), where ``plan`` may be a join of the
    enclosing rows with their uncorrelated subqueries' one-row values
    (``cross_join_one_row``): each conjunct equating a column of the enclosing rows with
    a value's column becomes that join's condition, and the rest is returned (None: no
    rest). For an inner join the two are the same rows; but a join on ``x = v`` is
    maintained by reading the rows at the changed value's key, where a product filtered
    afterwards joins the whole of both sides whenever the value changes (TPC-H Q15's
    ``total_revenue = (SELECT MAX(total_revenue) …)``: every supplier with its revenue)."""
    if not (isinstance(plan, Join) and plan.condition is None and len(plan.relations) == 2
            and isinstance(plan.relations[1], Product)):
        return plan, predicate
    base, values = (set(r.schema.names) for r in plan.relations)
    keys, rest = [], []
    for term in conjuncts(predicate):
        sides = (term.left, term.right) if isinstance(term, exp.EQ) else ()
        names = {s.name for s in sides if isinstance(s, exp.Column) and not s.table}
        linked = len(names) == 2 and bool(names & base) and bool(names & values)
        (keys if linked and names <= base | values else rest).append(term)
    if not keys:
        return plan, predicate
    keyed = Join(schema=plan.schema, relations=plan.relations, condition=and_all(keys))
    return keyed, and_all(rest) if rest else None
