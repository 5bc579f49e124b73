"""Turn a SELECT statement into a logical plan (``ivm.plan``).

sqlglot's optimizer rules (``ivm.sql_frontend.rules``: ``qualify``…) do the
name work first. The planner then walks the resolved AST, one module per
part of a query:

* ``unsupported``: constructs the engine cannot maintain, refused up front;
* ``queries``: SELECT or a set operation (UNION [ALL] [BY NAME], INTERSECT /
  EXCEPT [ALL]), and conforming columns to a target;
* ``ctes``: WITH, planned inline;
* ``select``: FROM → WHERE → aggregation → HAVING → windows, QUALIFY, DISTINCT ON →
  SELECT list → DISTINCT;
* ``from_clause``: each source renamed ``alias.column``; consecutive inner
  joins become one ``Join`` (a delta query later), an outer, semi or anti join
  takes everything before it as its left input;
* ``outer_joins``: LEFT / RIGHT / FULL JOIN as inner join ⊎ NULL-padded anti joins;
* ``semi_joins``: the one ``semi_join`` / ``anti_join`` (L ⋉_θ R, L ▷_θ R = L − L ⋉_θ R
  with bag semantics, any condition), plans of existing nodes, for outer joins, SEMI /
  ANTI joins and EXISTS / IN subqueries; also the shared join-building helpers;
* ``subqueries`` (with ``decorrelate`` and ``subquery_joins``): subqueries in WHERE,
  SELECT, HAVING and ON decorrelated into semi/anti joins (``semi_joins``), left joins
  to one-row-per-key relations and cross joins to one-row ones (``subquery_joins``);
* ``grouping`` and ``aggregate_calls``: GROUP BY as Project (keys, inputs) →
  Aggregate, each call checked against the aggregate-function registry;
  ``grouping_sets``: GROUPING SETS / ROLLUP / CUBE as the list of sets, each
  one Aggregate, NULL-padded, under a UNION ALL;
* ``windows``: window functions (one ``Window`` per PARTITION BY, stacked), QUALIFY (a
  filter over them) and DISTINCT ON (a ``DistinctOn``), after HAVING;
* ``values``: VALUES lists as constant relations, named as DuckDB names them;
* ``naming``: view column names as DuckDB gives them, column references.

DuckDB types every node: the planner renders the node's plain SQL and asks
the ``describe`` callback for its schema. Anything outside the supported
subset raises ``UnsupportedSQL`` naming the construct and where it is, in the
script the user passed (``origin`` says where the query's text starts there).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from sqlglot import exp

from ivm.plan.node import Plan
from ivm.schema import Column, Schema
from ivm.sql_frontend.identifiers import RESERVED_PREFIX, not_reserved
from ivm.sql_frontend.parsing import parse_query, quiet
from ivm.sql_frontend.planner.context import Context, Describe
from ivm.sql_frontend.planner.lateral import mark_implicit_laterals, plain_lateral_functions
from ivm.sql_frontend.planner.naming import materialized_type, unique_names
from ivm.sql_frontend.planner.pivot import rewrite_pivots
from ivm.sql_frontend.planner.queries import conform, plan_node
from ivm.sql_frontend.planner.resolve import resolve
from ivm.sql_frontend.planner.row_subqueries import row_subqueries
from ivm.sql_frontend.planner.table_functions import name_table_functions
from ivm.sql_frontend.planner.unsupported import reject_unsupported
from ivm.sql_frontend.planner.used_columns import used_names
from ivm.sql_frontend.planner.values import name_values_columns
from ivm.sql_frontend.positions import TEXT_START, Locator, Origin


def plan_query(
    sql: str,
    relations: Mapping[str, Schema],
    describe: Describe,
    *,
    origin: Origin = TEXT_START,
) -> Plan:
    """Plan one SELECT (or set operation) over ``relations`` (base tables and views).

    ``origin``: where ``sql`` starts in the script the user passed (``CreateView.origin``),
    so error positions are the script's; by default they are ``sql``'s own.
    """
    with quiet():
        tree = parse_query(sql, origin)
        return plan_expression(tree, relations, describe, sql, origin=origin)


def plan_expression(
    tree: exp.Expression,
    relations: Mapping[str, Schema],
    describe: Describe,
    sql: str | None = None,
    *,
    origin: Origin = TEXT_START,
) -> Plan:
    """Plan a parsed query; ``sql`` is the text it was parsed from (starting at ``origin``
    in the user's script), which names the columns as DuckDB does (sqlglot's regenerated
    text would rename ``substr(x, 1)`` to ``substring(x, 1)``) and locates errors."""
    locator = Locator(sql, origin)
    with quiet():
        parsed = tree
        tree = plain_lateral_functions(rewrite_pivots(tree, describe, locator))
        reject_unsupported(tree, locator)
        tree = name_table_functions(name_values_columns(tree), describe)
        tree = mark_implicit_laterals(tree)
        qualified = row_subqueries(resolve(tree, relations, locator))
        ctx = Context(relations, describe, locator, tree, plan_node)
        ctx.used_names = used_names(parsed, qualified)
        plan = ctx.query(qualified, {})
        # The view's columns are named and typed exactly as DuckDB names and types the query.
        text = sql if sql is not None else tree.sql(dialect="duckdb")
        target = describe(without_proctime(text))
        names = unique_names(target.names)
        not_reserved_outputs(names, parsed, locator)
        columns = tuple(
            Column(n, materialized_type(c.type))
            for n, c in zip(names, target.columns, strict=True)
        )
        return conform(ctx, plan, Schema(columns))


def not_reserved_outputs(names: list[str], tree: exp.Expression, locator: Locator) -> None:
    """Refuse a view column named like ivm's own columns (``__ivm_…``)."""
    for name in names:
        if name.lower().startswith(RESERVED_PREFIX):
            node = next((i for i in tree.find_all(exp.Identifier) if i.name == name), None)
            not_reserved(name, node, locator)


PROCTIME = re.compile(r"\bFOR\s+SYSTEM_TIME\s+AS\s+OF\s+PROCTIME\s*\(\s*\)", re.IGNORECASE)


def without_proctime(sql: str) -> str:
    """``sql`` without its ``FOR SYSTEM_TIME AS OF PROCTIME()`` clauses, which DuckDB does not
    parse (they change which rows join, never the columns' names and types)."""
    return PROCTIME.sub(" ", sql)


__all__ = [
    "Describe",
    "Origin",
    "materialized_type",
    "plan_expression",
    "plan_query",
    "reject_unsupported",
    "unique_names",
]
