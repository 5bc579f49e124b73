"""WHERE through outer joins: outer joins a WHERE makes inner, and conditions moved into
inner joins' ON, so a join stores only the rows the query can keep.

A SELECT's joins are planned left to right, and its WHERE over all of them; an outer join
takes everything before it as one input (``ivm.sql_frontend.planner.outer_joins``), and
that input is kept as state. Without this, ``a JOIN b … LEFT JOIN p … WHERE a.x = 1``
would store every row of ``a ⋈ b``. Two rewrites of the (qualified) SELECT, both exact:

* **Outer-join simplification.** A WHERE conjunct that is never TRUE when every column of
  table ``t`` is NULL (``rejects``: ``t.c = 1``, ``t.c + 1 > x``, ``t.c IS NOT NULL``,
  ``NOT t.c LIKE 'a%'``…; not ``t.c IS NULL``, ``COALESCE(t.c, 0) = 0``, a CASE) removes
  every row a join padded with NULLs for ``t``. So ``LEFT JOIN t`` becomes an inner join;
  a RIGHT JOIN whose left side holds such a ``t`` too; a FULL JOIN becomes LEFT (its left
  side's padded rows gone), RIGHT (its right side's), or inner (both).
* **Pushdown.** A conjunct moves into the ON of an inner join at or after the last table
  it reads, when every join after that one is inner or LEFT (those keep each row of their
  left input as it is, so filtering before them is filtering after them). Consecutive
  inner joins are planned as one ``Join``, so the condition filters that join's rows
  before any outer join stores them. A conjunct with a subquery, an aggregate, a window
  or a volatile function, or reading a column of another query (a correlation) stays in
  WHERE.

A SELECT with a join of another kind (ASOF, SEMI, ANTI, NATURAL, a temporal or lateral
join, a parenthesized join) is left as it is.
"""

from __future__ import annotations

from sqlglot import exp

from ivm.sql_frontend.planner.aggregate_calls import has_aggregate

SIDED = ("LEFT", "RIGHT", "FULL")

STRICT: tuple[type[exp.Expression], ...] = (
    exp.Paren, exp.Cast, exp.TryCast, exp.Neg, exp.Add, exp.Sub, exp.Mul, exp.Div,
    exp.IntDiv, exp.Mod, exp.Upper, exp.Lower, exp.Abs, exp.Substring, exp.Trim, exp.Length,
)
"""Expressions that are NULL whenever one of their operands is."""

COMPARISONS: tuple[type[exp.Expression], ...] = (
    exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.ILike,
)
"""Conditions that are NULL whenever one of their two operands is."""

KEPT: tuple[type[exp.Expression], ...] = (
    exp.Subquery, exp.Query, exp.Exists, exp.Window, exp.Rand, exp.Anonymous,
)
"""What keeps a conjunct in WHERE (planned there, or not safe to evaluate earlier)."""


def push_where(node: exp.Select) -> exp.Select:
    """``node`` with its WHERE simplifying its outer joins and moved into its inner joins'
    ON where exact (see the module docstring); ``node`` itself when nothing changes."""
    where, joins = node.args.get("where"), node.args.get("joins") or []
    from_ = node.args.get("from_") or node.args.get("from")
    if where is None or not joins or from_ is None:
        return node
    sources = [from_.this, *(j.this for j in joins)]
    names = [s.alias_or_name for s in sources]
    if not all(_plain(j) for j in joins) or not all(
        isinstance(s, (exp.Table, exp.Subquery)) for s in sources
    ) or "" in names or len(set(names)) != len(names):
        return node
    if not any((j.side or "").upper() in SIDED for j in joins):
        return node  # inner joins only: one Join under one Filter already
    node = node.copy()
    joins = node.args["joins"]
    condition = node.args["where"].this.unnest()
    conjuncts = list(condition.flatten()) if isinstance(condition, exp.And) else [condition]
    _simplify(joins, names, conjuncts)
    position = {name: i for i, name in enumerate(names)}
    kept = []
    for conjunct in conjuncts:
        target = _target(conjunct, joins, position)
        if target is None:
            kept.append(conjunct)
            continue
        on = target.args.get("on")
        target.set("on", exp.and_(on, conjunct, copy=False) if on is not None else conjunct)
    node.set("where", exp.Where(this=exp.and_(*kept, copy=False)) if kept else None)
    return node


def _plain(join: exp.Join) -> bool:
    """An inner, cross or outer join (what this module rewrites)."""
    kind = (join.args.get("kind") or "").upper()
    return (
        not join.args.get("method")
        and kind in ("", "INNER", "OUTER", "CROSS")
        and not join.args.get("using")
        and not (isinstance(join.this, exp.Table) and join.this.args.get("version"))
    )


def _simplify(joins: list[exp.Join], names: list[str], conjuncts: list[exp.Expression]) -> None:
    """Make each outer join inner (or one-sided) where a conjunct rejects its padded rows."""
    rejected = {n for n in names if any(rejects(c, n) for c in conjuncts)}
    for i, join in enumerate(joins, start=1):
        side = (join.side or "").upper()
        if side not in SIDED:
            continue
        left_gone = side in ("RIGHT", "FULL") and any(n in rejected for n in names[:i])
        right_gone = side in ("LEFT", "FULL") and names[i] in rejected
        if side == "FULL" and left_gone != right_gone:
            join.set("side", "LEFT" if left_gone else "RIGHT")
        elif (side == "LEFT" and right_gone) or (side == "RIGHT" and left_gone) or (
            left_gone and right_gone
        ):
            join.set("side", None)
            join.set("kind", None)


def _target(
    conjunct: exp.Expression, joins: list[exp.Join], position: dict[str, int]
) -> exp.Join | None:
    """The inner join whose ON ``conjunct`` moves into, or None to keep it in WHERE: the
    first inner join at or after the last table the conjunct reads, if no RIGHT or FULL
    join follows it."""
    if conjunct.find(*KEPT) is not None or has_aggregate(conjunct):
        return None
    tables = {c.table for c in conjunct.find_all(exp.Column)}
    if not tables or not tables <= position.keys():
        return None
    last = max(position[t] for t in tables)
    for i, join in enumerate(joins, start=1):
        if i >= last and _inner(join):
            later = joins[i:]
            if any((j.side or "").upper() in ("RIGHT", "FULL") for j in later):
                return None
            return join
    return None


def _inner(join: exp.Join) -> bool:
    """An inner join (with ON, or a comma join: its ON may be set)."""
    return not join.side and (join.args.get("kind") or "").upper() in ("", "INNER")


def rejects(condition: exp.Expression, table: str) -> bool:
    """``condition`` is never TRUE on a row where every column of ``table`` is NULL."""
    if isinstance(condition, exp.Paren):
        return rejects(condition.this, table)
    if isinstance(condition, exp.And):
        return rejects(condition.this, table) or rejects(condition.expression, table)
    if isinstance(condition, exp.Or):
        return rejects(condition.this, table) and rejects(condition.expression, table)
    if isinstance(condition, exp.Not) and isinstance(condition.this, exp.Is):
        return isinstance(condition.this.expression, exp.Null) and null_with(
            condition.this.this, table)
    if isinstance(condition, exp.Between):
        return any(null_with(condition.args.get(k), table) for k in ("this", "low", "high"))
    return null_with(condition, table)


def null_with(expression: exp.Expression | None, table: str) -> bool:
    """``expression`` is NULL on a row where every column of ``table`` is NULL."""
    if expression is None:
        return False
    if isinstance(expression, exp.Column):
        return expression.table == table
    if isinstance(expression, exp.Not):
        return null_with(expression.this, table)
    if isinstance(expression, COMPARISONS):
        return null_with(expression.this, table) or null_with(expression.expression, table)
    if isinstance(expression, exp.In):
        return not expression.args.get("query") and null_with(expression.this, table)
    if isinstance(expression, exp.Between):
        return null_with(expression.this, table)
    if isinstance(expression, STRICT):
        return any(null_with(v, table) for v in expression.iter_expressions())
    return False
