"""VALUES lists: constant relations (``ivm.operators.values``) in FROM, joins, CTE bodies,
set operands and subqueries, or as a whole query; and ``unit``, the one-row relation a
SELECT without FROM reads.

sqlglot names a VALUES list's unnamed columns ``_col_<i>`` and expands ``t(a)`` over a
two-column list to ``a`` alone; DuckDB names them ``col<i>`` (``t(a)``: ``a, col1``).
``name_values_columns`` writes DuckDB's names into every list's alias before names are
resolved, so ``*``, ``t.col1`` and the view's columns agree with DuckDB. The types are
DuckDB's too: the node is typed by describing its plain SQL, like every node.
"""

from __future__ import annotations

from sqlglot import exp

from ivm.errors import SqlError, UnsupportedSQL
from ivm.operators.values import Values
from ivm.plan.node import Plan
from ivm.schema import Column, Schema
from ivm.sql_frontend.planner.context import Context
from ivm.sql_frontend.positions import Locator


def rows_of(node: exp.Values) -> list[list[exp.Expression]]:
    """The list's rows, each as its expressions."""
    return [
        list(row.expressions) if isinstance(row, exp.Tuple) else [row]
        for row in node.expressions
    ]


def name_values_columns(tree: exp.Expression) -> exp.Expression:
    """A copy of ``tree`` whose VALUES lists each name all their columns as DuckDB does:
    the alias's column names, then ``col<i>`` for the columns past them."""
    tree = tree.copy()
    for node in tree.find_all(exp.Values):
        rows = rows_of(node)
        width = len(rows[0]) if rows else 0
        alias = node.args.get("alias")
        given = [c.name for c in alias.columns] if alias is not None else []
        if len(given) >= width:
            continue
        names = [*given, *(f"col{i}" for i in range(len(given), width))]
        columns = [exp.to_identifier(n) for n in names]
        if alias is None:
            node.set("alias", exp.TableAlias(columns=columns))
        else:
            alias.set("columns", columns)
    return tree


def check_values(node: exp.Values, locator: Locator) -> None:
    """UnsupportedSQL for a VALUES list ivm cannot maintain: one holding a subquery, or one
    reading columns other than as a joined FROM item reading the items before it (a
    lateral VALUES, ``FROM t, (VALUES (t.a), (t.b)) AS v(x)``: a flat map)."""
    lateral = isinstance(node.parent, exp.Join)
    for row in rows_of(node):
        for value in row:
            found = value.find(exp.Column, exp.Query)
            if isinstance(found, exp.Column) and lateral:
                continue
            if isinstance(found, exp.Column):
                construct = locator.describe("column reference in VALUES", found)
                raise UnsupportedSQL(
                    f"{construct} is not supported: a VALUES list must be constant"
                )
            if found is not None:
                construct = locator.describe("subquery in VALUES", found)
                raise UnsupportedSQL(f"{construct} is not supported")


def plan_values(ctx: Context, node: exp.Values) -> Plan:
    """The constant relation of a VALUES list, with DuckDB's names and types."""
    rows = tuple(tuple(row) for row in rows_of(node))
    alias = node.args.get("alias")
    names = [c.name for c in alias.columns] if alias is not None else []
    if any(len(row) != len(names) for row in rows):
        raise SqlError(
            f"{ctx.locator.describe('VALUES', node)}: every row must have "
            f"{len(names)} value(s), as many as the list has columns"
        )
    schema = Schema(tuple(Column(n, "INTEGER") for n in names))  # typed by DuckDB below
    return ctx.typed(Values(schema=schema, rows=rows))


UNIT_COLUMN = "__ivm_unit"


def unit(ctx: Context) -> Plan:
    """The relation of one row (a constant): what a SELECT without FROM reads (``SELECT 1,
    'a'``), and what a table function with constant arguments expands. Its one column
    (``__ivm_unit``, TRUE) is never a query's output."""
    schema = Schema((Column(UNIT_COLUMN, "BOOLEAN"),))
    return ctx.typed(Values(schema=schema, rows=((exp.true(),),)))
