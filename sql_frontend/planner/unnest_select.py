"""UNNEST in the SELECT list: a flat map of the rows the SELECT list is computed over.

DuckDB evaluates the SELECT list's UNNEST calls after grouping, windows and QUALIFY and
before DISTINCT, ORDER BY and LIMIT: each row becomes as many rows as its longest
unnested list (the calls of one SELECT list zip, shorter lists padded with NULL; a NULL
or empty list gives no row when it is the only one), ``unnest(struct)`` and
``unnest(…, recursive := true)`` expand into columns. Here every UNNEST call of the list
becomes a column of one ``FlatMap`` whose expansion is those calls in one SELECT
(``SELECT unnest(row.l) AS __u0, unnest(row.m) AS __u1``), so DuckDB zips them as it
would, and the SELECT list reads the columns instead of the calls.
"""

from __future__ import annotations

from sqlglot import exp

from ivm.errors import UnsupportedSQL
from ivm.operators.flat_map import FlatMap, row_column
from ivm.plan.node import Plan, plain_sql
from ivm.sql_frontend.planner.context import Context
from ivm.sql_frontend.planner.naming import ref

Outputs = list[tuple[str, exp.Expression]]
PREFIX = "__u"


def unnest_calls(expression: exp.Expression) -> list[exp.Explode]:
    """The outermost UNNEST calls inside ``expression`` (not those of nested subqueries)."""
    found: list[exp.Explode] = []

    def visit(node: exp.Expression) -> None:
        if isinstance(node, exp.Explode):
            found.append(node)
            return
        if isinstance(node, exp.Query):
            return
        for child in node.iter_expressions():
            visit(child)

    visit(expression)
    return found


def unnest_outputs(
    ctx: Context, select: exp.Select, plan: Plan, outputs: Outputs
) -> tuple[Plan, Outputs]:
    """``plan`` flat-mapped by the UNNEST calls of ``outputs`` (expressions over its
    columns), and ``outputs`` reading their columns; as they are without UNNEST calls."""
    calls = [(i, call) for i, (_, e) in enumerate(outputs) for call in unnest_calls(e)]
    if not calls:
        return plan, outputs
    if select.args.get("distinct") is not None and select.args["distinct"].args.get("on"):
        construct = ctx.locator.describe("UNNEST with DISTINCT ON", calls[0][1])
        raise UnsupportedSQL(f"{construct} is not supported")
    names = {n for n in plan.schema.names}

    def bind(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and node.name in names:
            return row_column(node.name)
        return node

    bound = [call.copy().transform(bind) for _, call in calls]
    expansion = exp.select(*(exp.alias_(c, f"{PREFIX}{j}") for j, c in enumerate(bound)))
    probe = ctx.typed(FlatMap(schema=plan.schema, input=plan, expansion=expansion, names=()))
    produced = probe.schema.names[len(plan.schema.names):]
    widths = [1] * len(calls)
    if len(produced) != len(calls):
        source = f"({plain_sql(plan)}) AS __ivm_row"
        widths = [len(ctx.describe(f"SELECT {c.sql(dialect='duckdb')} FROM {source}"))
                  for c in bound]
    columns: list[list[str]] = []
    position = 0
    for j, width in enumerate(widths):
        own = produced[position:position + width]
        position += width
        columns.append([f"{PREFIX}{j}"] if width == 1 else [f"{PREFIX}{j}.{n}" for n in own])
    flat = ctx.typed(FlatMap(schema=probe.schema, input=plan, expansion=expansion,
                             names=tuple(n for group in columns for n in group)))
    return flat, _rewritten(ctx, select, outputs, calls, columns, produced, widths)


def _rewritten(
    ctx: Context,
    select: exp.Select,
    outputs: Outputs,
    calls: list[tuple[int, exp.Explode]],
    columns: list[list[str]],
    produced: list[str],
    widths: list[int],
) -> Outputs:
    """``outputs`` with each call replaced by its column; an output that is one call
    expanding into several columns becomes those columns, named as DuckDB names them."""
    by_call = {id(call): (j, cols) for j, ((_, call), cols) in enumerate(zip(calls, columns,
                                                                           strict=True))}
    result: Outputs = []
    position = {j: sum(widths[:j]) for j in range(len(widths))}
    for name, expression in outputs:
        wide = by_call.get(id(expression))
        if wide is not None and len(wide[1]) > 1:
            if select.args.get("order") is not None:
                construct = ctx.locator.describe("UNNEST of a STRUCT with ORDER BY", expression)
                raise UnsupportedSQL(f"{construct} is not supported")
            start = position[wide[0]]
            result += [(field, ref(column)) for field, column in
                       zip(produced[start:start + len(wide[1])], wide[1], strict=True)]
            continue

        def swap(node: exp.Expression) -> exp.Expression:
            found = by_call.get(id(node))
            if found is None:
                return node
            if len(found[1]) > 1:
                construct = ctx.locator.describe("UNNEST of a STRUCT", node)
                raise UnsupportedSQL(
                    f"{construct} is supported only as a whole SELECT expression"
                )
            return ref(found[1][0], node)

        result.append((name, expression.transform(swap, copy=False)))
    return result
