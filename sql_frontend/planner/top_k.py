"""ORDER BY … LIMIT / OFFSET: the rows a query keeps, as a ``TopK`` node.

ORDER BY decides a query's contents only with LIMIT or OFFSET; without them it is
ignored, as a view's top-level ORDER BY always is. Each ORDER BY term is an output
column: by name or position, by an expression the SELECT list already computes, or
else a *hidden* column the SELECT list computes for it (also an aggregate in a
grouped query) and that is projected away after the TopK. Ties are broken by the
output columns (``ivm.operators.top_k``), so the result is deterministic.

``OFFSET m`` without LIMIT keeps every row after the first m: the input minus its
TopK of m rows (a linear ``Difference``). LIMIT without ORDER BY picks arbitrary
rows, which maintenance could not reproduce, unless it cannot cut anything: when the
plan proves its input holds at most k rows (``row_bounds.max_rows``), ``LIMIT k`` keeps
them all and is dropped (and an OFFSET past the bound, or LIMIT 0, keeps none); any
other LIMIT / OFFSET without ORDER BY is refused by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlglot import exp

from ivm.errors import SqlError, UnsupportedSQL
from ivm.operators.aggregate import SortKey
from ivm.operators.difference import Difference
from ivm.operators.filter import Filter
from ivm.operators.project import Project
from ivm.operators.top_k import TopK
from ivm.plan.node import Plan
from ivm.sql_frontend.planner.context import Context
from ivm.sql_frontend.planner.grouping import sql_text
from ivm.sql_frontend.planner.naming import ref
from ivm.sql_frontend.planner.row_bounds import max_rows

Output = tuple[str, exp.Expression]
"""A SELECT list entry: its name and expression."""


@dataclass
class Ordering:
    """A query's ORDER BY … LIMIT / OFFSET, its terms as output positions."""

    terms: list[tuple[int, bool, bool]]
    """(output position, descending, NULLS FIRST) per ORDER BY term."""
    limit: int | None
    offset: int
    hidden: list[Output] = field(default_factory=list)
    """Outputs computed only for ORDER BY (after the visible ones)."""
    unordered: exp.Expression | None = None
    """Without ORDER BY: the LIMIT / OFFSET clause (accepted only where it cannot
    choose between rows)."""


def ordering_of(
    ctx: Context,
    node: exp.Query,
    outputs: list[Output],
    *,
    can_hide: bool,
    columns: list[str] | tuple[str, ...] = (),
) -> Ordering | None:
    """``node``'s ORDER BY … LIMIT / OFFSET over its ``outputs``; None without LIMIT and
    OFFSET. ``can_hide``: ORDER BY may use expressions outside the outputs (a plain
    SELECT; not a set operation or SELECT DISTINCT, where SQL forbids it). ``columns``:
    the FROM clause's columns (``alias.column``), which a name inside an ORDER BY
    expression means before an output of that name (``_resolved``)."""
    limit_node, offset_node = node.args.get("limit"), node.args.get("offset")
    if limit_node is None and offset_node is None:
        return None
    order = node.args.get("order")
    limit = _count(ctx, limit_node) if limit_node is not None else None
    offset = _count(ctx, offset_node) if offset_node is not None else 0
    if order is None or not order.expressions:
        clause = limit_node if limit_node is not None else offset_node
        return Ordering([], limit, offset, unordered=clause)
    ordering = Ordering([], limit, offset)
    texts = {sql_text(e.unnest()): i for i, (_, e) in reversed(list(enumerate(outputs)))}
    names = {name.lower(): i for i, (name, _) in enumerate(outputs)}
    for term in order.expressions:
        descending = bool(term.args.get("desc"))
        nulls_first = bool(term.args.get("nulls_first"))
        expression = term.this
        if isinstance(expression, exp.Var) and expression.name.upper() == "ALL":
            ordering.terms += [(i, descending, nulls_first) for i in range(len(outputs))]
            continue
        if not _bare_name(expression):
            expression = _resolved(expression, node, outputs, columns)
        position = _position(expression, names, texts, len(outputs))
        if position is None:
            if not can_hide:
                construct = ctx.locator.describe("ORDER BY term", expression)
                raise SqlError(
                    f"{construct} must be one of the query's output columns here "
                    "(with SELECT DISTINCT or a set operation)"
                )
            position = len(outputs) + len(ordering.hidden)
            ordering.hidden.append((f"__ivm_order{len(ordering.hidden)}", expression))
        ordering.terms.append((position, descending, nulls_first))
    return ordering


def limited(ctx: Context, plan: Plan, ordering: Ordering | None) -> Plan:
    """``plan`` (the outputs, then the hidden ones) cut to the ordering's rows, with the
    hidden columns projected away."""
    if ordering is None:
        return plan
    if ordering.unordered is not None:
        return _unordered(ctx, plan, ordering)
    names = plan.schema.names
    keys = tuple(SortKey(names[p], d, n) for p, d, n in ordering.terms)
    if ordering.limit is not None:
        result = ctx.typed(TopK(plan.schema, plan, keys, ordering.limit, ordering.offset))
    else:  # OFFSET alone: everything but the first rows
        first = ctx.typed(TopK(plan.schema, plan, keys, ordering.offset))
        result = ctx.typed(Difference(plan.schema, plan, first))
    if not ordering.hidden:
        return result
    visible = names[: len(names) - len(ordering.hidden)]
    exprs = tuple((n, ref(n)) for n in visible)
    return ctx.typed(Project(schema=result.schema, input=result, exprs=exprs))


def _unordered(ctx: Context, plan: Plan, ordering: Ordering) -> Plan:
    """LIMIT / OFFSET without ORDER BY: ``plan`` whole when the LIMIT cannot cut it, no
    rows when the LIMIT is 0 or the OFFSET is past every row it can hold; refused
    otherwise (which rows it keeps would be DuckDB's arbitrary choice)."""
    bound = max_rows(plan)
    if ordering.limit == 0 or (bound is not None and ordering.offset >= bound):
        return ctx.typed(Filter(schema=plan.schema, input=plan, predicate=exp.false()))
    if bound is not None and ordering.offset == 0 and (
        ordering.limit is None or ordering.limit >= bound
    ):
        return plan
    raise unordered_refusal(ctx, ordering, bound)


def unordered_refusal(ctx: Context, ordering: Ordering, bound: int | None) -> UnsupportedSQL:
    """The error for a LIMIT / OFFSET without ORDER BY that could choose between rows of
    an input holding at most ``bound`` rows (None: any number)."""
    assert ordering.unordered is not None
    construct = ctx.locator.describe("LIMIT / OFFSET without ORDER BY", ordering.unordered)
    could = "any number of rows" if bound is None else f"up to {bound} rows"
    return UnsupportedSQL(
        f"{construct} is not supported: its input can hold {could}, and which of them "
        "it keeps is not determined (DuckDB picks arbitrary rows, which maintenance "
        "could not reproduce); add an ORDER BY that decides which rows"
    )


def _position(
    expression: exp.Expression, names: dict[str, int], texts: dict[str, int], count: int
) -> int | None:
    """The output an ORDER BY term names: by position, output name or same expression
    (parentheses around either aside: ``SELECT DISTINCT(a) … ORDER BY a``)."""
    if isinstance(expression, exp.Literal) and not expression.is_string:
        position = int(expression.this) - 1
        return position if 0 <= position < count else None
    if isinstance(expression, exp.Column) and not expression.table:
        found = names.get(expression.name.lower())
        if found is not None:
            return found
    return texts.get(sql_text(expression.unnest()))


def _bare_name(expression: exp.Expression) -> bool:
    """An ORDER BY term that is a name alone (an output's name before a column's)."""
    return isinstance(expression.unnest(), exp.Column) and not expression.unnest().table


def _resolved(
    expression: exp.Expression, node: exp.Query, outputs: list[Output], columns: Sequence[str]
) -> exp.Expression:
    """An ORDER BY expression with each unqualified name (``qualify`` leaves a name that is
    also an output's unqualified) resolved as DuckDB does inside an expression: the FROM
    clause's column of that name if there is exactly one, else the output's expression
    (``SELECT -a AS a … ORDER BY a + 0`` orders by the column ``a``; ``SELECT -a AS c …
    ORDER BY c + 0`` by ``-a``)."""
    by_column: dict[str, list[str]] = {}
    for column in columns:
        table, _, name = column.rpartition(".")
        if table:
            by_column.setdefault(name.lower(), []).append(table)
    by_output = {name.lower(): e for name, e in outputs}

    def replace(n: exp.Expression) -> exp.Expression:
        if not (isinstance(n, exp.Column) and not n.table and isinstance(n.this, exp.Identifier)):
            return n
        if n.find_ancestor(exp.Query) not in (node, None):
            return n  # a subquery's own column
        tables = by_column.get(n.name.lower(), [])
        if len(tables) == 1:
            return exp.column(n.this.copy(), table=exp.to_identifier(tables[0], quoted=True))
        if n.name.lower() in by_output:
            return by_output[n.name.lower()].copy()
        return n

    if isinstance(expression, exp.Column):
        return replace(expression)
    return expression.copy().transform(replace)


def _count(ctx: Context, clause: exp.Expression) -> int:
    """The row count of a LIMIT, FETCH or OFFSET clause: a non-negative integer literal."""
    options = clause.args.get("limit_options")
    if options is not None and (options.args.get("percent") or options.args.get("with_ties")):
        kind = "PERCENT" if options.args.get("percent") else "WITH TIES"
        raise UnsupportedSQL(f"{ctx.locator.describe('LIMIT … ' + kind, clause)} is not supported")
    value = clause.args.get("count") if isinstance(clause, exp.Fetch) else clause.expression
    if not (isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit()):
        raise UnsupportedSQL(
            f"{ctx.locator.describe('LIMIT / OFFSET count', value or clause)} is not supported: "
            "it must be a non-negative integer literal"
        )
    return int(value.this)
