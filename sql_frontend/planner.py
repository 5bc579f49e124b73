"""Turn a SELECT statement into a logical plan (``ivm.plan``).

sqlglot's own optimizer does the name work first: ``qualify`` expands ``*``,
resolves every column to its source, turns ``USING`` into ``ON`` and expands
positional and alias references in GROUP BY. The planner then walks the
qualified AST:

* each FROM source becomes a plan whose columns are renamed ``alias.column``,
  so names are unique across a join and expressions can refer to them alone;
* joins of any number of sources become one ``Join`` (a delta query later);
* aggregation becomes Project (keys, arguments) → Aggregate → Filter (HAVING)
  → Project (the SELECT list), with aggregate calls replaced by columns.

DuckDB types every node: the planner renders the node's plain SQL and asks the
``describe`` callback for its schema. Anything outside the supported subset
raises ``UnsupportedSQL`` naming the construct and where it is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import sqlglot
from ivm.sql_frontend.positions import describe as at
from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError
from sqlglot.optimizer.qualify import qualify

from ivm.errors import SqlError, UnsupportedSQL
from ivm.operators.aggregate import Aggregate, AggregateCall
from ivm.operators.distinct import Distinct
from ivm.operators.filter import Filter
from ivm.operators.join import Join
from ivm.operators.project import Project
from ivm.operators.scan import Scan
from ivm.operators.union_all import UnionAll
from ivm.plan.node import Plan, plain_sql
from ivm.plan.sql import union_all_sql
from ivm.schema import WEIGHT, Column, Schema

Describe = Callable[[str], Schema]
"""Returns the schema DuckDB gives a plain SQL query."""

AGGREGATES: dict[type[exp.Expression], str] = {
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
    exp.Count: "count",
}

VOLATILE: tuple[type[exp.Expression], ...] = (
    exp.Rand,
    exp.CurrentDate,
    exp.CurrentTime,
    exp.CurrentTimestamp,
    exp.CurrentDatetime,
    exp.Uuid,
)
VOLATILE_NAMES = frozenset({"random", "now", "gen_random_uuid", "uuid", "setseed", "nextval"})

UNSUPPORTED_NODES: dict[type[exp.Expression], str] = {
    exp.Window: "window function",
    exp.Limit: "LIMIT",
    exp.Offset: "OFFSET",
    exp.Qualify: "QUALIFY",
    exp.Lateral: "LATERAL",
    exp.Unnest: "UNNEST",
    exp.Pivot: "PIVOT",
    exp.Intersect: "INTERSECT",
    exp.Except: "EXCEPT",
    exp.Values: "VALUES",
    exp.Rollup: "ROLLUP",
    exp.Cube: "CUBE",
    exp.GroupingSets: "GROUPING SETS",
    exp.Filter: "aggregate FILTER clause",
}


def plan_query(sql: str, relations: Mapping[str, Schema], describe: Describe) -> Plan:
    """Plan one SELECT (or set operation) over ``relations`` (base tables and views)."""
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except SqlglotError as error:
        raise SqlError(f"cannot parse view query: {error}") from error
    return plan_expression(tree, relations, describe, sql)


def plan_expression(
    tree: exp.Expression,
    relations: Mapping[str, Schema],
    describe: Describe,
    sql: str | None = None,
) -> Plan:
    """Plan a parsed query; ``sql`` is its original text, which names the columns as DuckDB
    does (sqlglot's regenerated text would rename ``substr(x, 1)`` to ``substring(x, 1)``)."""
    reject_unsupported(tree)
    mapping = {name: {c.name: c.type for c in s.columns} for name, s in relations.items()}
    try:
        qualified = qualify(
            tree.copy(),
            schema=mapping,
            dialect="duckdb",
            quote_identifiers=False,
            validate_qualify_columns=True,
        )
    except (OptimizeError, SqlglotError) as error:
        raise SqlError(f"cannot resolve the view query: {error}") from error
    planner = _Planner(relations, describe)
    plan = planner.query(qualified, {})
    # The view's columns are named and typed exactly as DuckDB names and types the query.
    target = describe(sql if sql is not None else tree.sql(dialect="duckdb"))
    names = unique_names(target.names)
    columns = (
        Column(n, materialized_type(c.type)) for n, c in zip(names, target.columns, strict=True)
    )
    return planner.conform(plan, Schema(tuple(columns)))


def materialized_type(type_: str) -> str:
    """The type a column gets when stored: an untyped NULL is stored as INTEGER, as DuckDB's
    CREATE TABLE … AS does."""
    return "INTEGER" if type_.strip('"').upper() == "NULL" else type_


def unique_names(names: list[str]) -> list[str]:
    """Column names made unique as DuckDB's CREATE VIEW does: a repeat ``k`` becomes ``k_1``."""
    taken: set[str] = set()
    result = []
    for name in names:
        candidate, suffix = name, 0
        while candidate.lower() in taken:
            suffix += 1
            candidate = f"{name}_{suffix}"
        taken.add(candidate.lower())
        result.append(candidate)
    return result


def reject_unsupported(tree: exp.Expression) -> None:
    """Raise UnsupportedSQL for the first construct the engine cannot maintain."""
    for node in tree.walk():
        for kind, name in UNSUPPORTED_NODES.items():
            if isinstance(node, kind):
                raise UnsupportedSQL(f"{at(name, node)} is not supported")
        if isinstance(node, exp.Union) and node.args.get("by_name"):
            raise UnsupportedSQL(f"{at('UNION BY NAME', node)} is not supported: list the columns")
        if isinstance(node, exp.With) and node.args.get("recursive"):
            raise UnsupportedSQL(f"{at('WITH RECURSIVE', node)} is not supported yet")
        if isinstance(node, exp.Join):
            _check_join(node)
        if isinstance(node, exp.Table) and node.args.get("version") is not None:
            raise UnsupportedSQL(f"{at('FOR SYSTEM_TIME AS OF', node)} is not supported yet")
        if isinstance(node, exp.Table) and not isinstance(node.this, exp.Identifier):
            raise UnsupportedSQL(f"{at('table function', node)} is not supported")
        distinct = node.args.get("distinct") if isinstance(node, exp.Select) else None
        if isinstance(distinct, exp.Distinct) and distinct.args.get("on") is not None:
            raise UnsupportedSQL(f"{at('DISTINCT ON', node)} is not supported")
        if isinstance(node, exp.AggFunc):
            _check_aggregate(node)
        if isinstance(node, VOLATILE) or (
            isinstance(node, exp.Anonymous) and node.name.lower() in VOLATILE_NAMES
        ):
            raise UnsupportedSQL(
                f"{at('non-deterministic function', node)} is not supported: "
                "its value would differ between maintenance and recomputation"
            )
        if isinstance(node, (exp.Subquery, exp.Select)) and _in_expression(node):
            raise UnsupportedSQL(f"{at('subquery in an expression', node)} is not supported")


def _check_join(join: exp.Join) -> None:
    method = (join.args.get("method") or "").upper()
    side = (join.args.get("side") or "").upper()
    kind = (join.args.get("kind") or "").upper()
    if method:
        raise UnsupportedSQL(f"{at(method + ' JOIN', join)} is not supported yet")
    if side:
        raise UnsupportedSQL(f"{at(side + ' JOIN', join)} is not supported yet")
    if kind not in ("", "INNER", "CROSS"):
        raise UnsupportedSQL(f"{at(kind + ' JOIN', join)} is not supported")


def _check_aggregate(node: exp.AggFunc) -> None:
    if type(node) not in AGGREGATES:
        raise UnsupportedSQL(
            f"{at('aggregate function ' + node.key.upper(), node)} is not supported"
        )
    if isinstance(node.this, exp.Distinct):
        raise UnsupportedSQL(
            f"{at(node.key.upper() + '(DISTINCT ...)', node)} is not supported yet"
        )
    for inner in node.this.walk() if node.this is not None else ():
        if inner is not node.this and isinstance(inner, exp.AggFunc):
            raise SqlError(f"{at('nested aggregate', node)}: aggregates cannot be nested")


def _in_expression(node: exp.Expression) -> bool:
    """True when a (sub)query sits inside a scalar expression rather than in FROM/JOIN/WITH."""
    parent = node.parent
    if parent is None:
        return False
    if isinstance(node, exp.Select):
        return not isinstance(parent, (exp.Subquery, exp.CTE, exp.Union, exp.With))
    return not isinstance(parent, (exp.From, exp.Join, exp.Union, exp.Subquery))


def _qualified_name(column: exp.Column) -> str:
    return f"{column.table}.{column.name}" if column.table else column.name


def _ref(name: str) -> exp.Column:
    return exp.Column(this=exp.Identifier(this=name, quoted=True))


def _rename_columns(expression: exp.Expression) -> exp.Expression:
    """Replace every ``alias.col`` column with the single identifier ``"alias.col"``."""

    def rename(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            return _ref(_qualified_name(node))
        return node

    return expression.copy().transform(rename)


class _Planner:
    """Walks one qualified query; ``scope`` maps visible CTE names to plans."""

    def __init__(self, relations: Mapping[str, Schema], describe: Describe) -> None:
        self.relations = relations
        self.describe = describe
        # sqlglot folds unquoted names to lower case; DuckDB's names are case-insensitive.
        self.stored_names = {n.lower(): n for n in relations}

    def typed(self, node: Plan) -> Plan:
        """``node`` with the schema DuckDB gives its plain SQL."""
        schema = self.describe(plain_sql(node))
        for column in schema.columns:
            if column.name == WEIGHT:
                raise SqlError(f"column name {WEIGHT!r} is reserved for weights")
        return dataclasses.replace(node, schema=schema)

    # -- queries ---------------------------------------------------------------------------

    def query(self, node: exp.Expression, scope: dict[str, Plan]) -> Plan:
        if isinstance(node, exp.Subquery):
            return self.query(node.this, scope)
        if isinstance(node, exp.Union):
            return self.union(node, scope)
        if isinstance(node, exp.Select):
            return self.select(node, scope)
        raise UnsupportedSQL(f"{at(type(node).__name__, node)} is not supported as a query")

    def union(self, node: exp.Union, scope: dict[str, Plan]) -> Plan:
        scope = self.with_ctes(node, scope)
        left = self.query(node.left, scope)
        right = self.query(node.right, scope)
        if len(left.schema) != len(right.schema):
            raise SqlError(f"{at('UNION', node)}: both sides must have the same number of columns")
        # DuckDB unifies the two sides' types (INTEGER ∪ DECIMAL → DECIMAL); so do we.
        target = self.describe(union_all_sql([plain_sql(left), plain_sql(right)]))
        parts = tuple(self.conform(p, target) for p in (left, right))
        result = self.typed(UnionAll(schema=target, parts=parts))
        if node.args.get("distinct"):
            result = self.typed(Distinct(schema=result.schema, input=result))
        return result

    def conform(self, plan: Plan, target: Schema) -> Plan:
        """``plan`` with ``target``'s column names and types (for set operations)."""
        if plan.schema == target:
            return plan
        exprs = tuple(
            (t.name, exp.cast(_ref(c.name), t.type, dialect="duckdb"))
            for c, t in zip(plan.schema.columns, target.columns, strict=True)
        )
        return self.typed(Project(schema=target, input=plan, exprs=exprs))

    def with_ctes(self, node: exp.Expression, scope: dict[str, Plan]) -> dict[str, Plan]:
        with_ = node.args.get("with_") or node.args.get("with")
        if not with_:
            return scope
        scope = dict(scope)
        for cte in with_.expressions:
            scope[cte.alias_or_name] = self.query(cte.this, scope)
        return scope

    def select(self, node: exp.Select, scope: dict[str, Plan]) -> Plan:
        scope = self.with_ctes(node, scope)
        plan = self.from_clause(node, scope)
        where = node.args.get("where")
        if where is not None:
            if any(isinstance(n, exp.AggFunc) for n in where.this.walk()):
                raise SqlError(f"{at('aggregate in WHERE', where)}: use HAVING")
            plan = self.typed(
                Filter(schema=plan.schema, input=plan, predicate=_rename_columns(where.this))
            )
        outputs = [(e.alias_or_name, _rename_columns(e.unalias())) for e in node.expressions]
        having = node.args.get("having")
        group = node.args.get("group")
        aggregated = (
            group is not None
            or having is not None
            or any(isinstance(n, exp.AggFunc) for _, e in outputs for n in e.walk())
        )
        if aggregated:
            if group is not None and group.args.get("all"):
                # DuckDB's GROUP BY ALL: every SELECT expression without an aggregate.
                keys = [
                    e for _, e in outputs if not any(isinstance(n, exp.AggFunc) for n in e.walk())
                ]
            else:
                keys = [_rename_columns(k) for k in (group.expressions if group else [])]
            # GROUP BY a, a groups by a once.
            keys = list({k.sql(dialect="duckdb"): k for k in keys}.values())
            having_expr = _rename_columns(having.this) if having is not None else None
            plan, outputs, having_expr = self.aggregate(plan, keys, outputs, having_expr, node)
            if having_expr is not None:
                plan = self.typed(Filter(schema=plan.schema, input=plan, predicate=having_expr))
        names = unique_names([name for name, _ in outputs])
        exprs = tuple((name, e) for name, (_, e) in zip(names, outputs, strict=True))
        plan = self.typed(Project(schema=plan.schema, input=plan, exprs=exprs))
        if node.args.get("distinct") is not None:
            plan = self.typed(Distinct(schema=plan.schema, input=plan))
        return plan

    # -- FROM and joins --------------------------------------------------------------------

    def from_clause(self, node: exp.Select, scope: dict[str, Plan]) -> Plan:
        from_ = node.args.get("from_") or node.args.get("from")
        if from_ is None:
            raise UnsupportedSQL(f"{at('SELECT without FROM', node)} is not supported")
        relations = [self.source(from_.this, scope)]
        conditions: list[exp.Expression] = []
        for join in node.args.get("joins") or []:
            relations.append(self.source(join.this, scope))
            on = join.args.get("on")
            if on is not None:
                conditions.append(_rename_columns(on))
        if len(relations) == 1:
            return relations[0]
        condition = exp.and_(*conditions) if conditions else None
        columns = tuple(c for r in relations for c in r.schema.columns)
        return self.typed(
            Join(schema=Schema(columns), relations=tuple(relations), condition=condition)
        )

    def source(self, node: exp.Expression, scope: dict[str, Plan]) -> Plan:
        """A FROM item as a plan whose columns are named ``alias.column``."""
        alias = node.alias_or_name
        if isinstance(node, exp.Table):
            name = node.name
            if node.args.get("db") or node.args.get("catalog"):
                raise UnsupportedSQL(f"{at('schema-qualified table name', node)} is not supported")
            stored = self.stored_names.get(name.lower())
            if name in scope:
                inner = scope[name]
            elif stored is not None:
                inner = Scan(schema=self.relations[stored], name=stored)
            else:
                raise SqlError(f"{at('unknown table ' + repr(name), node)}")
        elif isinstance(node, exp.Subquery):
            inner = self.query(node.this, scope)
        else:
            raise UnsupportedSQL(f"{at(type(node).__name__ + ' in FROM', node)} is not supported")
        exprs = tuple((f"{alias}.{c.name}", _ref(c.name)) for c in inner.schema.columns)
        return self.typed(Project(schema=inner.schema, input=inner, exprs=exprs))

    # -- aggregation -----------------------------------------------------------------------

    def aggregate(
        self,
        plan: Plan,
        keys: list[exp.Expression],
        outputs: list[tuple[str, exp.Expression]],
        having: exp.Expression | None,
        node: exp.Select,
    ) -> tuple[Plan, list[tuple[str, exp.Expression]], exp.Expression | None]:
        """Plan GROUP BY; returns the aggregate plan and the outputs/HAVING rewritten over it."""
        key_names = {k.sql(dialect="duckdb"): f"__k{i}" for i, k in enumerate(keys)}
        calls: dict[str, AggregateCall] = {}
        arguments: dict[str, str] = {}
        pre = [(name, key) for key, name in zip(keys, key_names.values(), strict=True)]

        def call_for(agg: exp.AggFunc) -> AggregateCall:
            text = agg.sql(dialect="duckdb")
            if text not in calls:
                func = AGGREGATES[type(agg)]
                argument = agg.this
                if func == "count" and (argument is None or isinstance(argument, exp.Star)):
                    func, arg = "count_star", None
                else:
                    arg_text = argument.sql(dialect="duckdb")
                    if arg_text not in arguments:
                        arguments[arg_text] = f"__a{len(arguments)}"
                        pre.append((arguments[arg_text], argument))
                    arg = arguments[arg_text]
                args = (arg,) if arg is not None else ()
                calls[text] = AggregateCall(name=f"__g{len(calls)}", func=func, args=args)
            return calls[text]

        def over_aggregate(expression: exp.Expression) -> exp.Expression:
            def replace(n: exp.Expression) -> exp.Expression:
                text = n.sql(dialect="duckdb")
                if text in key_names:
                    return _ref(key_names[text])
                if isinstance(n, exp.AggFunc):
                    return _ref(call_for(n).name)
                return n

            rewritten = expression.copy().transform(replace)
            for column in rewritten.find_all(exp.Column):
                if not column.name.startswith(("__k", "__g")):
                    raise SqlError(
                        f"{at('column ' + repr(column.name), node)} must appear in GROUP BY "
                        "or be used in an aggregate function"
                    )
            return rewritten

        new_outputs = [(name, over_aggregate(e)) for name, e in outputs]
        new_having = over_aggregate(having) if having is not None else None
        if pre:
            project = Project(schema=plan.schema, input=plan, exprs=tuple(pre))
            plan = self.typed(project)
        else:
            # COUNT(*) alone: keep one constant column so the input has a row shape.
            plan = self.typed(
                Project(schema=plan.schema, input=plan, exprs=(("__one", exp.Literal.number(1)),))
            )
        aggregate = Aggregate(
            schema=plan.schema,
            input=plan,
            keys=tuple(key_names.values()),
            calls=tuple(calls.values()),
        )
        return self.typed(aggregate), new_outputs, new_having
