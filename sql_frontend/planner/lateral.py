"""FROM items that read the rows before them: table functions and LATERAL subqueries.

``FROM t, unnest(t.tags) AS u(tag)``, ``FROM t, generate_series(1, t.n) AS g(i)`` and
``FROM t, LATERAL (SELECT t.a + 1 AS b)`` (a subquery reading no table, only the row) and
``FROM t, (VALUES (t.a), (t.b)) AS v(x)`` give
each row of what comes before them (the *left* side) the rows a query computes from that
row alone: a ``FlatMap`` of the left side (``ivm.operators.flat_map``), linear and without
state. ``LEFT JOIN`` keeps a left row that expands to nothing (or to nothing its ON
condition accepts) once, padded with NULLs; an inner join's ON condition filters. A table
function with constant arguments is the same flat map over whatever comes before it, or,
as the first FROM item, over the one-row relation ``unit`` (a constant).

A LATERAL subquery that reads tables is decorrelated (``dependent_join``).
"""

from __future__ import annotations

from sqlglot import exp

from ivm.errors import SqlError, UnsupportedSQL
from ivm.operators.filter import Filter
from ivm.operators.flat_map import FlatMap, row_column
from ivm.plan.node import Plan
from ivm.sql_frontend.planner.context import Context, Scope
from ivm.sql_frontend.planner.dependent_join import correlated_lateral
from ivm.sql_frontend.planner.naming import rename_columns
from ivm.sql_frontend.planner.table_functions import function_of
from ivm.sql_frontend.planner.values import unit

INNER_KINDS = ("", "INNER", "CROSS")


def is_lateral_item(node: exp.Expression) -> bool:
    """Whether a FROM item reads (or may read) the rows before it: a table function, a
    LATERAL subquery, or a VALUES list reading columns."""
    if isinstance(node, exp.Values):
        return node.find(exp.Column) is not None
    return function_of(node) is not None or isinstance(node, exp.Lateral)


def reads_tables(item: exp.Expression) -> bool:
    """Whether a LATERAL subquery reads a table, view or CTE (rather than only the row)."""
    return any(isinstance(t.this, exp.Identifier) for t in item.find_all(exp.Table))


def own_aliases(item: exp.Expression) -> set[str]:
    """Names a FROM item defines inside itself (and its own alias)."""
    kinds = (exp.Table, exp.Subquery, exp.CTE, exp.Values, exp.Unnest, exp.Lateral)
    return {n.alias_or_name for n in item.find_all(*kinds) if n.alias_or_name}


def plain_lateral_functions(tree: exp.Expression) -> exp.Expression:
    """``tree`` with each ``LATERAL f(…) AS a`` (a table function or UNNEST after the
    keyword) written ``f(…) AS a``: in FROM, a function reads the items before it with or
    without the keyword. Left as it is: ``WITH ORDINALITY`` after LATERAL (refused)."""

    def plain(node: exp.Expression) -> exp.Expression:
        if (not isinstance(node, exp.Lateral) or isinstance(node.this, exp.Subquery)
                or node.args.get("ordinality") or node.args.get("view")):
            return node
        item = node.this.copy()
        if not isinstance(item, exp.Unnest):
            item = exp.Table(this=item)
        if node.args.get("alias") is not None:
            item.set("alias", node.args["alias"].copy())
        return item

    return tree.transform(plain)


def item_query(item: exp.Expression) -> exp.Select:
    """``SELECT * FROM item``: the rows the item gives (for one left row)."""
    if isinstance(item, exp.Lateral):
        subquery = item.this
        if not isinstance(subquery, exp.Subquery):
            construct = "LATERAL " + type(subquery).__name__
            raise UnsupportedSQL(f"{construct} is not supported")
        source: exp.Expression = exp.Subquery(
            this=subquery.this.copy(), alias=item.args.get("alias").copy()
            if item.args.get("alias") is not None else None)
    else:
        source = item.copy()
    return exp.select("*").from_(source)


def bind_row(
    ctx: Context, expression: exp.Expression, left: Plan, own: set[str]
) -> exp.Expression:
    """``expression`` reading the left row's columns as ``row_column``: every column whose
    table is not one of ``own``. UnsupportedSQL for one the left side does not have (a
    reference to an enclosing query)."""
    names = set(left.schema.names)
    by_name: dict[str, list[str]] = {}
    for full in left.schema.names:
        by_name.setdefault(full.rsplit(".", 1)[-1].lower(), []).append(full)

    def bind(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
            return node
        if not node.table:
            # sqlglot leaves a table function's argument unqualified (``range(n)``).
            found = by_name.get(node.name.lower(), [])
            if len(found) > 1:
                raise SqlError(f"{ctx.locator.describe('ambiguous column', node)}: qualify it")
            return row_column(found[0]) if found else node
        if node.table in own:
            return node
        name = f"{node.table}.{node.name}"
        if name not in names:
            construct = ctx.locator.describe("correlated reference", node)
            raise UnsupportedSQL(
                f"{construct} is not supported: a table function or LATERAL subquery may "
                "read only the FROM items before it"
            )
        return row_column(name)

    return expression.copy().transform(bind)


def flat_map_join(
    ctx: Context,
    left: Plan,
    item: exp.Expression,
    side: str,
    on: exp.Expression | None,
) -> Plan:
    """``left`` joined (inner, or LEFT when ``side`` says so) with the rows ``item`` gives
    for each of its rows, on ``on``."""
    own = own_aliases(item)
    body: exp.Query = item_query(item)
    condition = on if on is not None and not _is_true(on) else None
    if side == "LEFT" and condition is not None:
        body = body.where(condition.copy(), copy=False)
    body = bind_row(ctx, body, left, own)
    if side == "LEFT":
        body = _padded(body)
    alias = item.alias_or_name
    probe = ctx.typed(FlatMap(schema=left.schema, input=left, expansion=body, names=()))
    produced = probe.schema.names[len(left.schema.names):]
    names = tuple(f"{alias}.{n}" if alias else n for n in produced)
    plan = ctx.typed(FlatMap(schema=probe.schema, input=left, expansion=body, names=names))
    if side != "LEFT" and condition is not None:
        predicate = rename_columns(condition)
        plan = ctx.typed(Filter(schema=plan.schema, input=plan, predicate=predicate))
    return plan


def _padded(body: exp.Select) -> exp.Select:
    """``body``'s rows, or one row of NULLs when it has none (a LEFT JOIN's padding)."""
    one = exp.Subquery(this=exp.select(exp.alias_(exp.true(), "__ivm_one")),
                       alias=exp.TableAlias(this=exp.to_identifier("__ivm_one")))
    rows = exp.Subquery(this=body, alias=exp.TableAlias(this=exp.to_identifier("__ivm_rows")))
    return exp.select("__ivm_rows.*").from_(one).join(rows, on=exp.true(), join_type="LEFT")


def _is_true(condition: exp.Expression) -> bool:
    return isinstance(condition, exp.Boolean) and bool(condition.this)


def lateral_join(
    ctx: Context, join: exp.Join, left: Plan, scope: Scope
) -> Plan | None:
    """``left`` joined with the lateral FROM item of ``join``; None when the item reads
    nothing of ``left`` and joins in a way only an ordinary relation can (RIGHT, FULL,
    SEMI, ANTI), so it is planned as one."""
    item = join.this
    side = (join.args.get("side") or "").upper()
    kind = (join.args.get("kind") or "").upper()
    on = join.args.get("on")
    inner = not side and kind in INNER_KINDS
    if not inner and not (side == "LEFT" and kind in ("", "OUTER")):
        if not _reads_left(item, left):
            return None
        construct = " ".join(w for w in (side, kind) if w) + " JOIN of a lateral item"
        raise UnsupportedSQL(
            f"{ctx.locator.describe(construct, join)} is not supported: an item reading "
            "the FROM items before it joins them with an inner or LEFT join"
        )
    if isinstance(item, exp.Lateral) and reads_tables(item):
        return correlated_lateral(ctx, left, item, side, on, scope, own_aliases(item))
    return flat_map_join(ctx, left, item, side, on)


def standalone(ctx: Context, item: exp.Expression) -> Plan:
    """A table function or a LATERAL subquery reading no table, with nothing before it:
    the flat map of the one-row relation."""
    return flat_map_join(ctx, unit(ctx), item, "", None)


def _reads_left(item: exp.Expression, left: Plan) -> bool:
    own = own_aliases(item)
    names = set(left.schema.names)
    return any(
        c.table and c.table not in own and f"{c.table}.{c.name}" in names
        for c in item.find_all(exp.Column)
    )


def mark_implicit_laterals(tree: exp.Expression) -> exp.Expression:
    """``tree`` (changed in place) with each derived table that reads a FROM item before it
    by name (``FROM t, (SELECT unnest(t.l) AS x) AS s``) marked LATERAL, as DuckDB reads it."""
    for select in list(tree.find_all(exp.Select)):
        from_ = select.args.get("from_") or select.args.get("from")
        if from_ is None:
            continue
        before = {from_.this.alias_or_name}
        for join in select.args.get("joins") or []:
            item = join.this
            if isinstance(item, exp.Subquery) and not item.args.get("joins"):
                own = own_aliases(item.this)
                if any(c.table in before and c.table not in own
                       for c in item.this.find_all(exp.Column)):
                    lateral = exp.Lateral(this=exp.Subquery(this=item.this),
                                          alias=item.args.get("alias"))
                    item.replace(lateral)
            before.add(item.alias_or_name)
    return tree
