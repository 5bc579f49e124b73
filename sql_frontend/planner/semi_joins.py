"""Semi and anti joins with bag semantics, built from existing plan nodes.

``semi_join(ctx, L, R, θ)`` is L ⋉_θ R: every row of L that some row of R
matches under θ, once per copy of it in L (its own multiplicity, however many R
rows match); ``anti_join`` is L ▷_θ R = L − L ⋉_θ R, the rows no R row matches.
Both read columns named ``alias.column`` (the planner's names), the two sides'
names disjoint. They are plans of Join, Distinct, Filter, Project and
Difference, so they are maintained incrementally in every execution mode.

The condition's conjuncts are sorted by the columns they read:

* *keys*: ``l = r`` or ``l IS NOT DISTINCT FROM r`` with one side reading only
  L's columns and the other only R's;
* *left-only* conditions (and ``ON l.x > 1``): an L row failing them matches
  nothing, so they stay on the join with L;
* *right-only* conditions and constants (``ON FALSE``): a filter on R;
* *mixed*: anything else (``l.a < r.b``, ``l.k + r.k = 3``, an OR of both).

Without mixed conjuncts, L ⋉ R = π_L(L ⋈_{keys, left-only} Distinct(π_keys σ_right-only R)):
the Distinct holds each key with a match once, and its output changes only
when a key's count of matching R rows crosses zero. With mixed conjuncts,
L ⋉ R = π_L(L ⋈ Distinct(π_L(L ⋈_θ R))), joined back NULL-safely on every L
column, so each copy of an L row keeps its multiplicity.

The anti join is L − L ⋉ R through the linear ``Difference``: it keeps no state
beyond the semi join's Distinct (of R's keys, or of the matched L rows) and its
change is fused into its consumer's SQL. (Negating at the key level instead,
L ⋈ (Distinct(π_k L) − π_k(Distinct(π_k L) ⋈ Distinct(π_k R))), also keeps L's
distinct keys, or every distinct L row for a mixed condition, and costs two
more statements per epoch; its SQL grows slower only past about five anti
joins stacked on one input.)

Outer joins (``outer_joins``) and subqueries (``subqueries``: EXISTS, IN and
their negations as WHERE conjuncts) both use these. ``join``, ``project``,
``and_all`` and ``matched_rows`` are the planner's shared join-building helpers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlglot import exp

from ivm.operators.difference import Difference
from ivm.operators.distinct import Distinct
from ivm.operators.filter import Filter
from ivm.operators.join import Join, conjuncts
from ivm.operators.project import Project
from ivm.plan.node import Plan
from ivm.schema import Schema
from ivm.sql_frontend.planner.context import Context
from ivm.sql_frontend.planner.naming import ref

PREFIX = "__semi."
"""Prefix of the columns a semi join's matched side is renamed to (never a user's
``alias.column``: aliases cannot be empty)."""


@dataclass
class SplitCondition:
    """A join condition's conjuncts sorted by the side(s) whose columns they read."""

    keys: list[tuple[exp.Expression, exp.Expression, bool]] = field(default_factory=list)
    """(left expression, right expression, NULL-safe) equalities across the sides."""
    left: list[exp.Expression] = field(default_factory=list)
    right: list[exp.Expression] = field(default_factory=list)
    """Conditions on the right side only, and constant conditions."""
    mixed: list[exp.Expression] = field(default_factory=list)


def split_condition(
    condition: exp.Expression | None, left: Schema, right: Schema
) -> SplitCondition:
    """The conjuncts of ``condition`` (over ``left``'s and ``right``'s columns), sorted."""
    left_names, right_names = set(left.names), set(right.names)
    split = SplitCondition()
    for conjunct in conjuncts(condition):
        read = _columns(conjunct)
        if not read:
            split.right.append(conjunct)
        elif read <= left_names:
            split.left.append(conjunct)
        elif read <= right_names:
            split.right.append(conjunct)
        elif isinstance(conjunct, (exp.EQ, exp.NullSafeEQ)) and (
            pair := _sides(conjunct, left_names, right_names)
        ):
            split.keys.append((*pair, isinstance(conjunct, exp.NullSafeEQ)))
        else:
            split.mixed.append(conjunct)
    return split


def semi_join(ctx: Context, left: Plan, right: Plan, condition: exp.Expression | None) -> Plan:
    """L ⋉_θ R with bag semantics: each row of ``left`` with a match in ``right`` under
    ``condition``, with its own weight; the plan has ``left``'s schema."""
    split = split_condition(condition, left.schema, right.schema)
    if split.mixed:
        matched, names = matched_rows(ctx, left, right, condition)
        terms = [
            exp.NullSafeEQ(this=ref(name), expression=ref(PREFIX + name)) for name in names
        ]
    else:
        matched = _matched_keys(ctx, right, split)
        terms = [
            _equality(l_expr, ref(f"{PREFIX}k{i}"), null_safe)
            for i, (l_expr, _, null_safe) in enumerate(split.keys)
        ] + split.left
    joined = join(ctx, left, matched, and_all(terms))
    return project(ctx, joined, left.schema.names)


def anti_join(ctx: Context, left: Plan, right: Plan, condition: exp.Expression | None) -> Plan:
    """L ▷_θ R with bag semantics: each row of ``left`` that no row of ``right`` matches
    under ``condition``, with its own weight (L minus its semi join)."""
    semi = semi_join(ctx, left, right, condition)
    return ctx.typed(Difference(schema=left.schema, minuend=left, subtrahend=semi))


def matched_rows(
    ctx: Context, left: Plan, right: Plan, condition: exp.Expression | None,
    prefix: str = PREFIX,
) -> tuple[Plan, list[str]]:
    """Distinct(π_C(π_C L ⋈_θ R)), where C are the columns of ``left`` that ``condition``
    reads: each distinct value of C that some row of ``right`` matches, once, its columns
    renamed ``prefix + name``; and C. Whether a row of ``left`` matches depends on its C
    only, so joining ``left`` back to it null-safely on C keeps exactly the matched rows,
    each with its own weight; the Distinct keeps C, not whole rows (TPC-H Q21's EXISTS
    reads 2 of the outer row's 11 columns)."""
    read = _columns(condition) if condition is not None else set()
    names = [n for n in left.schema.names if n in read] or list(left.schema.names)
    joined = join(ctx, project(ctx, left, names), right, condition)
    exprs = tuple((prefix + name, ref(name)) for name in names)
    rows = ctx.typed(Project(schema=joined.schema, input=joined, exprs=exprs))
    return ctx.typed(Distinct(schema=rows.schema, input=rows)), names


def join(ctx: Context, left: Plan, right: Plan, condition: exp.Expression | None) -> Plan:
    """Inner join of two plans (None: cross product); columns: ``left``'s, then ``right``'s."""
    columns = left.schema.columns + right.schema.columns
    return ctx.typed(Join(schema=Schema(columns), relations=(left, right), condition=condition))


def project(ctx: Context, plan: Plan, names: Sequence[str]) -> Plan:
    """``plan`` restricted to the columns ``names`` (in that order; itself if they are all
    of its columns in its order)."""
    if tuple(names) == tuple(plan.schema.names):
        return plan
    exprs = tuple((n, ref(n)) for n in names)
    return ctx.typed(Project(schema=plan.schema, input=plan, exprs=exprs))


def and_all(terms: Sequence[exp.Expression | None]) -> exp.Expression | None:
    """The conjunction of ``terms``, None ones skipped (None for none)."""
    present = [t for t in terms if t is not None]
    if not present:
        return None
    return exp.and_(*present) if len(present) > 1 else present[0]


def _matched_keys(ctx: Context, right: Plan, split: SplitCondition) -> Plan:
    """Distinct(π_keys σ_right-only R), columns ``__semi.k<i>`` (``__semi.any`` when there
    is no key: one row while some R row passes the filter)."""
    source = right
    if split.right:
        predicate = and_all(split.right)
        assert predicate is not None
        source = ctx.typed(Filter(schema=right.schema, input=right, predicate=predicate))
    exprs = tuple((f"{PREFIX}k{i}", r_expr) for i, (_, r_expr, _) in enumerate(split.keys))
    if not exprs:
        exprs = ((f"{PREFIX}any", exp.true()),)
    keys = ctx.typed(Project(schema=source.schema, input=source, exprs=exprs))
    if holds_each_row_once(keys):
        return keys
    return ctx.typed(Distinct(schema=keys.schema, input=keys))


def holds_each_row_once(plan: Plan) -> bool:
    """Whether ``plan`` is a Distinct's rows under renames only (each projection lists
    every column of its input once, as a plain column): distinct already, so another
    Distinct over it would keep the same rows in a second trace (a magic set's keys,
    ``decorrelate._magic_set``, are such a Distinct)."""
    while isinstance(plan, Project):
        read = [e.name for _, e in plan.exprs if isinstance(e, exp.Column)]
        if len(read) != len(plan.exprs) or sorted(read) != sorted(plan.input.schema.names):
            return False
        plan = plan.input
    return isinstance(plan, Distinct)


def _equality(left: exp.Expression, right: exp.Expression, null_safe: bool) -> exp.Expression:
    kind = exp.NullSafeEQ if null_safe else exp.EQ
    return kind(this=left.copy(), expression=right)


def _columns(expression: exp.Expression) -> set[str]:
    return {c.name for c in expression.find_all(exp.Column)}


def _sides(
    equality: exp.Binary, left: set[str], right: set[str]
) -> tuple[exp.Expression, exp.Expression] | None:
    """(left side, right side) of an equality whose sides each read one input only."""
    a, b = equality.left, equality.right
    read_a, read_b = _columns(a), _columns(b)
    if read_a and read_b and read_a <= left and read_b <= right:
        return a, b
    if read_a and read_b and read_a <= right and read_b <= left:
        return b, a
    return None
