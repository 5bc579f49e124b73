"""WITH RECURSIVE: a CTE that reads itself becomes a ``Recursive`` plan node.

DuckDB's form: ``name [(columns)] AS (anchor UNION [ALL] step)``, where the last
UNION splits the two (the anchor may itself be a set operation) and only the
step reads ``name``. The anchor names and types the columns (DuckDB casts each
iteration's rows to them); inside the step, ``name`` is a ``Feedback`` leaf, and
the parts of the step that do not read it become the node's imports.
"""

from __future__ import annotations

from sqlglot import exp

from ivm.circuit.iterations import NotIterable, tag_iterations
from ivm.errors import SqlError, UnsupportedSQL
from ivm.operators.project import Project
from ivm.operators.recursive import Body, Feedback, Recursive, split_imports
from ivm.plan.node import Plan
from ivm.schema import Column, Schema
from ivm.sql_frontend.planner.context import Context, Scope
from ivm.sql_frontend.planner.naming import ref


def reads_itself(cte: exp.CTE) -> bool:
    """True when the CTE's query reads its own name (it is recursive)."""
    return _reads(cte.this, cte.alias_or_name)


def plan_recursive(ctx: Context, cte: exp.CTE, scope: Scope) -> Plan:
    """The plan of a recursive CTE (see the module docstring)."""
    name = cte.alias_or_name
    body = cte.this
    where = ctx.locator.describe(f"recursive CTE {name!r}", cte)
    if cte.args.get("key_expressions"):
        raise UnsupportedSQL(f"{where}: USING KEY is not supported")
    if not isinstance(body, exp.Union):
        raise SqlError(f"{where} must be an anchor query UNION [ALL] a recursive step")
    for clause in ("order", "limit", "offset"):
        if body.args.get(clause):
            raise UnsupportedSQL(
                f"{where}: {clause.upper()} on the recursive query is not supported"
            )
    if body.args.get("by_name"):
        raise UnsupportedSQL(f"{where}: UNION BY NAME is not supported in a recursive CTE")
    if _reads(body.left, name):
        raise SqlError(f"{where}: its anchor (the part before the last UNION) reads {name!r}")
    anchor = _named(ctx, ctx.query(body.left, scope), _column_names(cte), where)
    feedback = Feedback(schema=anchor.schema, name=name)
    step = ctx.query(body.right, {**scope, name: feedback})
    if len(step.schema) != len(anchor.schema):
        raise SqlError(f"{where}: the anchor and the step have different numbers of columns")
    step = _conformed(ctx, step, anchor.schema)
    plan, imports = split_imports(step)
    try:
        tag_iterations(plan)
    except NotIterable as error:
        raise UnsupportedSQL(f"{where}: {error.construct} is not supported") from None
    return ctx.typed(
        Recursive(
            schema=anchor.schema,
            anchor=anchor,
            imports=imports,
            step=Body(plan),
            name=name,
            union_all=not body.args.get("distinct"),
        )
    )


def _reads(node: exp.Expression, name: str) -> bool:
    return any(t.name.lower() == name.lower() for t in node.find_all(exp.Table))


def _column_names(cte: exp.CTE) -> list[str]:
    alias = cte.args.get("alias")
    return [c.name for c in alias.columns] if alias is not None else []


def _named(ctx: Context, anchor: Plan, names: list[str], where: str) -> Plan:
    """The anchor with the CTE's column names (its own when the CTE lists none)."""
    if not names or names == anchor.schema.names:
        return anchor
    if len(names) != len(anchor.schema):
        raise SqlError(f"{where} names {len(names)} columns; its anchor has {len(anchor.schema)}")
    exprs = tuple((n, ref(c)) for n, c in zip(names, anchor.schema.names, strict=True))
    return ctx.typed(Project(schema=anchor.schema, input=anchor, exprs=exprs))


def _conformed(ctx: Context, step: Plan, target: Schema) -> Plan:
    """The step with the anchor's names and types (DuckDB casts to them)."""
    if step.schema == target:
        return step
    exprs = tuple(
        (t.name, ref(c.name) if c.type == t.type else _cast(c.name, t.type))
        for c, t in zip(step.schema.columns, target.columns, strict=True)
    )
    return Project(schema=Schema(tuple(Column(t.name, t.type) for t in target.columns)),
                   input=step, exprs=exprs)


def _cast(name: str, type_: str) -> exp.Expression:
    return exp.cast(ref(name), type_, dialect="duckdb")
