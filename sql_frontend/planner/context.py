"""What every part of the planner shares while it plans one query."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from sqlglot import exp

from ivm.errors import SqlError
from ivm.plan.node import Plan, plain_sql
from ivm.plan.sql import empty_relation
from ivm.schema import WEIGHT, Schema
from ivm.sql_frontend.positions import Locator

Describe = Callable[[str], Schema]
"""Returns the schema DuckDB gives a plain SQL query."""

Scope = dict[str, Plan]
"""The CTEs visible at a point of the query, by name."""

PlanQuery = Callable[["Context", exp.Expression, Scope], Plan]
"""Plans a (nested) query: a SELECT, a set operation or a parenthesized query."""


@dataclass
class Context:
    """The relations a query may read, DuckDB's typing, and where the query's text is.

    ``tree`` is the query as parsed (positions of names), ``plan_query`` the planner's
    entry point for nested queries (FROM subqueries, CTE bodies, set operands).
    """

    relations: Mapping[str, Schema]
    describe: Describe
    locator: Locator
    tree: exp.Expression
    plan_query: PlanQuery
    stored_names: dict[str, str] = field(init=False)
    used_names: frozenset[str] | None = None
    """The names the query mentions (``used_columns``): a table's other columns are not
    planned; None: every column is."""
    subqueries: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        # sqlglot folds unquoted names to lower case; DuckDB's names are case-insensitive.
        self.stored_names = {n.lower(): n for n in self.relations}

    def fresh_alias(self) -> str:
        """A new alias for a decorrelated subquery's columns (``__sq<n>``), in planning order
        (so planning the same query again gives the same names)."""
        self.subqueries += 1
        return f"__sq{self.subqueries}"

    def query(self, node: exp.Expression, scope: Scope) -> Plan:
        """Plan a nested query."""
        return self.plan_query(self, node, scope)

    def typed(self, node: Plan) -> Plan:
        """``node`` with the schema DuckDB gives its plain SQL."""
        schema = self._described(node)
        for column in schema.columns:
            if column.name == WEIGHT:
                named = next(
                    (i for i in self.tree.find_all(exp.Identifier) if i.name == WEIGHT), None
                )
                raise SqlError(
                    f"{self.locator.describe('column ' + repr(WEIGHT), named)}: "
                    "the name is reserved for weights"
                )
        return dataclasses.replace(node, schema=schema)

    def _described(self, node: Plan) -> Schema:
        """The schema DuckDB gives ``node``'s plain SQL over inputs of its children's
        (typed) schemas and no rows: the text of one node, not of everything below it,
        which a deep plan would describe again at every level (TPC-DS q14: 12 s of its
        18 s load). Should DuckDB not bind that (a node whose SQL reads more than its
        children's rows), the whole plan's SQL."""
        children = node.children()
        if children:
            try:
                return self.describe(node.plain(
                    [empty_relation(c.schema, weighted=False) for c in children]))
            except SqlError:
                pass
        return self.describe(plain_sql(node))
