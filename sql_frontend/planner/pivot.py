"""PIVOT and UNPIVOT (DuckDB's statement form and the SQL-standard form in FROM) as the
ordinary queries they stand for, rewritten before names are resolved.

With static ``IN`` lists, PIVOT is a GROUP BY with one FILTERed aggregate per IN value
(combination) and aggregate::

    PIVOT t ON k IN (1, 2) USING sum(n) GROUP BY g
    = SELECT g, sum(n) FILTER (WHERE k IS NOT DISTINCT FROM 1) AS "1",
                sum(n) FILTER (WHERE k IS NOT DISTINCT FROM 2) AS "2" FROM t GROUP BY g

(every group is a row, its cells NULL, COUNT 0, where no row has the value; NULL in the
list matches NULL). Without GROUP BY the groups are the columns neither ON nor USING
reads; without USING the aggregate is ``count(*)``. UNPIVOT is a flat map: each row
followed by one row per unpivoted column (its name and value), NULL values dropped unless
INCLUDE NULLS:

    UNPIVOT t ON a, b INTO NAME col VALUE val
    = SELECT t.g, u.col, u.val FROM t, LATERAL (SELECT 'a' AS col, t.a AS val
                                                UNION ALL SELECT 'b', t.b) AS u
      WHERE u.val IS NOT NULL

The output's column names (and so which columns are groups) are DuckDB's: the PIVOT or
UNPIVOT is described, with the CTEs visible where it stands. A PIVOT without an IN list
has columns that depend on the data, which no view can maintain: it is refused by name.
"""

from __future__ import annotations

import itertools

from sqlglot import exp

from ivm.errors import UnsupportedSQL
from ivm.sql_frontend.planner.aggregate_calls import calls_in
from ivm.sql_frontend.planner.context import Describe
from ivm.sql_frontend.positions import Locator

SOURCE = "__ivm_source"
"""The alias of a PIVOT's or UNPIVOT's source when it has none (a subquery)."""
UNPIVOTED = "__ivm_unpivoted"


def rewrite_pivots(tree: exp.Expression, describe: Describe, locator: Locator
                   ) -> exp.Expression:
    """``tree`` (copied) with each PIVOT and UNPIVOT rewritten as the query it stands for,
    innermost first."""
    tree = tree.copy()
    for pivot in reversed(list(tree.find_all(exp.Pivot))):
        rewriter = _Pivot(pivot, describe, locator)
        statement = pivot.args.get("this") is not None
        target = pivot if statement else pivot.parent
        query = rewriter.query()
        if not statement:
            alias = pivot.args.get("alias") or target.args.get("alias")
            name = alias.name if alias is not None else target.alias_or_name
            query = exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier(name)))
        if target is tree:
            tree = query
        else:
            target.replace(query)
    return tree


class _Pivot:
    """One PIVOT or UNPIVOT and what its rewrite needs."""

    def __init__(self, pivot: exp.Pivot, describe: Describe, locator: Locator) -> None:
        self.pivot = pivot
        self.describe = describe
        self.locator = locator
        self.statement = pivot.args.get("this") is not None
        self.name = "UNPIVOT" if pivot.args.get("unpivot") else "PIVOT"

    def refuse(self, what: str, node: exp.Expression | None = None, why: str = "") -> None:
        construct = self.locator.describe(what, node if node is not None else self.pivot)
        raise UnsupportedSQL(f"{construct} is not supported{why}")

    # -- the source, its output names ------------------------------------------------------

    def source(self) -> tuple[exp.Expression, str]:
        """The FROM item the pivot reads (without the pivot) and the name it goes by."""
        if self.statement:
            source = self.pivot.this.copy()
        else:
            source = self.pivot.parent.copy()
            source.set("pivots", None)
        if not isinstance(source, exp.Table) or not isinstance(source.this, exp.Identifier):
            alias = source.alias_or_name or SOURCE
            if not source.alias_or_name:
                source.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
            return source, alias
        return source, source.alias_or_name

    def _in_context(self, sql: str) -> str:
        """``sql`` preceded by the CTEs visible where the pivot stands (DuckDB describes it)."""
        ctes: list[exp.CTE] = []
        recursive = False
        child: exp.Expression = self.pivot
        parent = child.parent
        while parent is not None:
            with_ = parent.args.get("with_") if isinstance(parent, exp.Query) else None
            if with_ is not None and child is not with_:
                ctes = [*with_.expressions, *ctes]
                recursive = recursive or bool(with_.args.get("recursive"))
            elif isinstance(parent, exp.With):
                index = next(i for i, c in enumerate(parent.expressions) if c is child)
                ctes = [*parent.expressions[:index], *ctes]
                recursive = recursive or bool(parent.args.get("recursive"))
            child, parent = parent, parent.parent
        if not ctes:
            return sql
        defined = ", ".join(c.sql(dialect="duckdb") for c in ctes)
        return f"WITH {'RECURSIVE ' if recursive else ''}{defined} {sql}"

    def output_names(self) -> list[str]:
        """DuckDB's column names of the pivot's result."""
        if self.statement:
            sql = self.pivot.sql(dialect="duckdb")
        else:
            sql = f"SELECT * FROM {self.pivot.parent.sql(dialect='duckdb')}"
        return list(self.describe(self._in_context(sql)).names)

    def query(self) -> exp.Query:
        if self.name == "UNPIVOT":
            return self.unpivot()
        return self.pivot_query()

    # -- PIVOT -----------------------------------------------------------------------------

    def pivot_query(self) -> exp.Select:
        pivot = self.pivot
        if self.statement:
            fields = list(pivot.expressions or [])
            aggregates = list(pivot.args.get("using") or []) or [
                exp.Count(this=exp.Star(), big_int=True)]
        else:
            fields = list(pivot.args.get("fields") or [])
            aggregates = list(pivot.expressions or [])
        for field in fields:
            if not isinstance(field, exp.In) or not field.expressions:
                self.refuse(f"{self.name} without an IN list", field,
                            ": its columns would depend on the data; list the values with "
                            "ON column IN (…)")
        values = [[v.this if isinstance(v, (exp.PivotAlias, exp.Alias)) else v
                   for v in field.expressions] for field in fields]
        cells = list(itertools.product(*values))
        names = self.output_names()
        width = len(cells) * len(aggregates)
        group_names = names[: len(names) - width]
        group = pivot.args.get("group")
        groups: list[exp.Expression]
        if group is not None:
            groups = [e.copy() for e in group.expressions]
            if len(groups) != len(group_names):
                self.refuse(f"{self.name} with this GROUP BY", group)
        else:
            groups = [exp.column(exp.to_identifier(n, quoted=True)) for n in group_names]
        selects: list[exp.Expression] = [
            exp.alias_(g.copy(), n, quoted=True) for g, n in zip(groups, group_names, strict=True)
        ]
        pivot_names = iter(names[len(group_names):])
        for cell in cells:
            condition = exp.and_(*(
                exp.NullSafeEQ(this=field.this.copy(), expression=value.copy())
                for field, value in zip(fields, cell, strict=True)
            ))
            for aggregate in aggregates:
                selects.append(exp.alias_(_filtered(aggregate.unalias(), condition),
                                          next(pivot_names), quoted=True))
        source, _ = self.source()
        select = exp.Select(expressions=selects)
        select.set("from_", exp.From(this=source))
        if groups:
            select.set("group", exp.Group(expressions=[g.copy() for g in groups]))
        return select

    # -- UNPIVOT ---------------------------------------------------------------------------

    def unpivot(self) -> exp.Select:
        pivot = self.pivot
        source, alias = self.source()
        names = self.output_names()
        if self.statement:
            columns = list(pivot.expressions or [])
        else:
            fields = list(pivot.args.get("fields") or [])
            if len(fields) != 1 or len(pivot.expressions or []) != 1:
                self.refuse(f"{self.name} with several value columns")
            columns = list(fields[0].expressions)
        if len(names) < 2:
            self.refuse(self.name)
        others, (name_column, value_column) = names[:-2], names[-2:]
        entries: list[tuple[str, exp.Expression]] = []
        for column in columns:
            if isinstance(column, exp.Columns):
                source_names = self.describe(self._in_context(
                    f"SELECT * FROM {source.sql(dialect='duckdb')}")).names
                entries += [(n, exp.column(exp.to_identifier(n, quoted=True)))
                            for n in source_names if n not in others]
                continue
            label_node = None
            if isinstance(column, (exp.Alias, exp.PivotAlias)):
                label_node, column = column.args.get("alias"), column.this
            if not isinstance(column, exp.Column):
                self.refuse(f"{self.name} of {column.sql(dialect='duckdb')}", column)
            label = label_node.name if label_node is not None else column.name
            entries.append((label, column))
        branches = [
            exp.select(exp.alias_(exp.Literal.string(label), name_column, quoted=True),
                       exp.alias_(exp.column(exp.to_identifier(c.name, quoted=c.this.quoted),
                                             table=exp.to_identifier(alias)),
                                  value_column, quoted=True))
            for label, c in entries
        ]
        union: exp.Query = branches[0]
        for branch in branches[1:]:
            union = exp.union(union, branch, distinct=False)
        lateral = exp.Lateral(this=exp.Subquery(this=union),
                              alias=exp.TableAlias(this=exp.to_identifier(UNPIVOTED)))
        selects = [exp.alias_(exp.column(exp.to_identifier(n, quoted=True),
                                         table=exp.to_identifier(alias)), n, quoted=True)
                   for n in others]
        selects += [exp.alias_(exp.column(exp.to_identifier(n, quoted=True),
                                          table=exp.to_identifier(UNPIVOTED)), n, quoted=True)
                    for n in (name_column, value_column)]
        select = exp.Select(expressions=selects)
        select.set("from_", exp.From(this=source))
        select.set("joins", [exp.Join(this=lateral)])
        if not pivot.args.get("include_nulls"):
            value = exp.column(exp.to_identifier(value_column, quoted=True),
                               table=exp.to_identifier(UNPIVOTED))
            select.set("where", exp.Where(this=exp.Not(this=exp.Is(this=value,
                                                                    expression=exp.null()))))
        return select


def _filtered(aggregate: exp.Expression, condition: exp.Expression) -> exp.Expression:
    """``aggregate`` with each of its calls counting only the rows ``condition`` holds on."""
    aggregate = aggregate.copy()
    if isinstance(aggregate, exp.Filter) and not aggregate.parent and calls_in(aggregate) == [
            aggregate]:
        where = aggregate.expression
        where.set("this", exp.and_(where.this, condition.copy()))
        return aggregate
    if calls_in(aggregate) == [aggregate]:
        return exp.Filter(this=aggregate, expression=exp.Where(this=condition.copy()))
    for call in calls_in(aggregate):
        if isinstance(call, exp.Filter):
            where = call.expression
            where.set("this", exp.and_(where.this, condition.copy()))
        else:
            call.replace(exp.Filter(this=call.copy(),
                                    expression=exp.Where(this=condition.copy())))
    return aggregate
