"""Subqueries that read only the row: computed by a LATERAL item (a flat map), not joined.

``EXISTS (SELECT 1 FROM unnest(t.tags) AS u(x) WHERE x = 'red')`` or
``(SELECT sum(x) FROM unnest(t.nums) AS u(x))`` read no table: their value is a function
of the row of the FROM items around them, which DuckDB computes as it is. So in a WHERE
clause, and in the SELECT list of a SELECT without GROUP BY or aggregates, each one
becomes a column of a LATERAL item joined after the FROM items (``…, LATERAL (SELECT
EXISTS (…) AS v) AS __ivm_row_subquery<n>``: one row per row, ``lateral``'s flat map) and
is read from it. Subqueries reading tables, or columns of a query further out, are left
to the subquery planner (``subqueries``).
"""

from __future__ import annotations

from sqlglot import exp

from ivm.sql_frontend.planner.aggregate_calls import has_aggregate
from ivm.sql_frontend.planner.lateral import own_aliases, reads_tables
from ivm.sql_frontend.planner.subqueries import is_construct

ALIAS = "__ivm_row_subquery{}"
VALUE = "v"


def row_subqueries(tree: exp.Expression) -> exp.Expression:
    """``tree`` (qualified; changed in place) with every subquery that reads only its
    SELECT's row computed by a LATERAL item of that SELECT."""
    count = 0
    for select in list(tree.find_all(exp.Select)):
        from_ = select.args.get("from_") or select.args.get("from")
        if from_ is None:
            continue
        items = [from_.this, *(j.this for j in select.args.get("joins") or [])]
        aliases = {i.alias_or_name for i in items if i.alias_or_name}
        places: list[exp.Expression] = []
        where = select.args.get("where")
        if where is not None:
            places.append(where.this)
        grouped = select.args.get("group") is not None or select.args.get("having") is not None
        if not grouped and not any(has_aggregate(e) for e in select.expressions):
            places += list(select.expressions)
        for place in places:
            for node in list(_constructs(place)):
                if not _reads_only(node, aliases):
                    continue
                name = ALIAS.format(count)
                count += 1
                value = exp.select(exp.alias_(node.copy(), VALUE))
                lateral = exp.Lateral(this=exp.Subquery(this=value),
                                      alias=exp.TableAlias(this=exp.to_identifier(name)))
                select.append("joins", exp.Join(this=lateral, kind="CROSS"))
                node.replace(exp.column(VALUE, table=name))
    return tree


def _constructs(expression: exp.Expression) -> list[exp.Expression]:
    """The outermost subquery constructs of ``expression``'s own query."""
    found: list[exp.Expression] = []
    stack = [expression]
    while stack:
        node = stack.pop()
        if is_construct(node):
            found.append(node)
        elif not isinstance(node, exp.Query):
            stack.extend(node.iter_expressions())
    return found


def _reads_only(construct: exp.Expression, aliases: set[str]) -> bool:
    """Whether ``construct`` reads no table and some column of the FROM items ``aliases``
    (and no column of a query further out)."""
    if reads_tables(construct):
        return False
    own = own_aliases(construct)
    outer = [c for c in construct.find_all(exp.Column) if c.table and c.table not in own]
    return bool(outer) and all(c.table in aliases for c in outer)
