"""LATERAL subqueries that read tables: the dependent join, decorrelated.

``FROM L, LATERAL (Q) AS s`` where Q reads tables and columns ``L.c₁ … L.cₙ`` evaluates Q
once per row of L. As Neumann and Kemper decorrelate a dependent join, Q is evaluated
once per distinct value of the columns it reads instead, over the *domain*
D = DISTINCT π_{c₁…cₙ} L, and joined back:

    L ⋈ Q(L.c)  =  L ⋈_{L.c ≡ D.d} Q'(D)

Q' is Q with D cross joined into its FROM (first, so a LEFT JOIN inside Q keeps it), every
reference ``L.cᵢ`` read as ``D.dᵢ``, and D's columns added to its SELECT list (each branch
of a set operation), GROUP BY, DISTINCT ON and window partitions: whatever Q computes for
one outer row, Q' computes per domain value. Then:

* ``ORDER BY … LIMIT n OFFSET m`` (per outer row) is a ``row_number()`` over each domain
  value's rows, kept for ranks m+1 … m+n; ties are broken by every output column, as a
  view's own LIMIT breaks them (``ivm.operators.top_k``);
* an aggregate without GROUP BY gives one row per outer row even over no rows: Q' groups
  by D, and D LEFT JOIN that supplies the rows of domain values without any (COUNT 0,
  other aggregates NULL, HAVING evaluated on them);
* the join back matches NULL-safely (a NULL correlation value is a value Q was evaluated
  for); ``LEFT JOIN LATERAL … ON c`` keeps the rows of L without a match, NULL-padded.

The rewrite is a query the planner then plans as any other (D is a CTE in its scope), so
every construct Q' uses is maintained as it is elsewhere. Refused by name: a correlated
reference inside a derived table or CTE of Q, RIGHT or FULL joins inside Q, GROUPING SETS.
"""

from __future__ import annotations

from sqlglot import exp

from ivm.errors import SqlError, UnsupportedSQL
from ivm.operators.distinct import Distinct
from ivm.operators.join import conjuncts
from ivm.operators.project import Project
from ivm.plan.node import Plan
from ivm.sql_frontend.planner.aggregate_calls import calls_in, has_aggregate, in_scope
from ivm.sql_frontend.planner.context import Context, Scope
from ivm.sql_frontend.planner.empty_aggregates import counts_over_no_rows
from ivm.sql_frontend.planner.grouping_sets import plain_group
from ivm.sql_frontend.planner.naming import ref, rename_columns
from ivm.sql_frontend.planner.outer_joins import outer_join
from ivm.sql_frontend.planner.semi_joins import and_all, join
from ivm.sql_frontend.planner.top_k import ordering_of, unordered_refusal

DOMAIN_COLUMN = "__ivm_d{}"
HIDDEN_COLUMN = "__ivm_order{}"
WRAPPED = "__ivm_ranked"
GROUPED = "__ivm_grouped"
MATCHED = "__ivm_matched"
def correlated_lateral(
    ctx: Context,
    left: Plan,
    item: exp.Lateral,
    side: str,
    on: exp.Expression | None,
    scope: Scope,
    own: set[str],
) -> Plan:
    """``left`` joined (inner, or LEFT when ``side`` says so) with the LATERAL subquery
    ``item``, which reads tables and maybe columns of ``left`` (``own``: the names the
    item defines inside itself)."""
    query = item.this.this
    while isinstance(query, exp.Subquery):
        query = query.this
    names = set(left.schema.names)
    outer: dict[str, None] = {}
    for column in query.find_all(exp.Column):
        if column.table and column.table not in own:
            name = f"{column.table}.{column.name}"
            if name not in names:
                construct = ctx.locator.describe("correlated reference", column)
                raise UnsupportedSQL(
                    f"{construct} is not supported: a LATERAL subquery may read only the "
                    "FROM items before it"
                )
            outer[name] = None
    values = _value_names(ctx, item, query)
    alias = item.alias_or_name
    if not outer:
        inner = ctx.query(query, scope)
        exprs = tuple((f"{alias}.{v}", ref(c)) for v, c in zip(values, inner.schema.names,
                                                                strict=True))
        right = ctx.typed(Project(schema=inner.schema, input=inner, exprs=exprs))
        condition = None
    else:
        domain_name = ctx.fresh_alias()
        columns = {name: DOMAIN_COLUMN.format(i) for i, name in enumerate(outer)}
        exprs = tuple((d, ref(name)) for name, d in columns.items())
        projected = ctx.typed(Project(schema=left.schema, input=left, exprs=exprs))
        domain = ctx.typed(Distinct(schema=projected.schema, input=projected))
        rewriter = _Rewriter(ctx, domain_name, columns, own)
        rewritten = rewriter.query(query)
        inner = ctx.query(rewritten, {**scope, domain_name: domain})
        width = len(values)
        exprs = tuple(
            [(f"{alias}.{v}", ref(c)) for v, c in zip(values, inner.schema.names[:width],
                                                     strict=True)]
            + [(f"{domain_name}.{d}", ref(c)) for d, c in zip(columns.values(),
                                                              inner.schema.names[width:],
                                                              strict=True)]
        )
        right = ctx.typed(Project(schema=inner.schema, input=inner, exprs=exprs))
        condition = and_all([
            exp.NullSafeEQ(this=ref(name), expression=ref(f"{domain_name}.{d}"))
            for name, d in columns.items()
        ])
    if on is not None and not (isinstance(on, exp.Boolean) and on.this):
        condition = and_all([condition, rename_columns(on)])
    if side == "LEFT":
        return outer_join(ctx, "LEFT", left, right, condition)
    return join(ctx, left, right, condition)


def _value_names(ctx: Context, item: exp.Lateral, query: exp.Query) -> list[str]:
    """The subquery's column names: the alias's column list, else its SELECT list's."""
    alias = item.args.get("alias")
    given = [c.name for c in alias.columns] if alias is not None else []
    selected = list(query.named_selects)
    if given and len(given) > len(selected):
        raise SqlError(f"{ctx.locator.describe('LATERAL alias', alias)}: too many column names")
    names = given + selected[len(given):]
    if len({n.lower() for n in names}) != len(names):
        raise UnsupportedSQL(
            f"{ctx.locator.describe('LATERAL subquery', item)} with repeated column names is "
            "not supported: give each column its own alias"
        )
    return names


class _Rewriter:
    """Builds Q' from Q: the per-domain-value form of a correlated subquery."""

    def __init__(self, ctx: Context, domain: str, columns: dict[str, str], own: set[str]):
        self.ctx = ctx
        self.domain = domain
        self.columns = columns
        self.own = own

    def domain_column(self, name: str, table: str | None = None) -> exp.Column:
        """The domain's column ``name`` (as read through ``table``, by default the domain)."""
        return exp.column(exp.to_identifier(name), table=exp.to_identifier(table or self.domain))

    def domain_outputs(self, table: str | None = None) -> list[exp.Expression]:
        """The domain's columns as SELECT-list entries named as they are."""
        return [exp.alias_(self.domain_column(d, table), d) for d in self.columns.values()]

    def bind(self, expression: exp.Expression) -> exp.Expression:
        """``expression`` reading the domain's columns for the outer references."""

        mine = {self.domain, GROUPED, WRAPPED}

        def swap(node: exp.Expression) -> exp.Expression:
            if (isinstance(node, exp.Column) and node.table and node.table not in self.own
                    and node.table not in mine):
                return self.domain_column(self.columns[f"{node.table}.{node.name}"])
            return node

        return expression.transform(swap)

    def query(self, query: exp.Query) -> exp.Query:
        """Q' of ``query`` (a SELECT or set operation, maybe with ORDER BY … LIMIT)."""
        query = query.copy()
        limited = query.args.get("limit") is not None or query.args.get("offset") is not None
        if not limited:
            query.set("order", None)
            return self.body(query)
        return self.ranked(query)

    def body(self, query: exp.Query) -> exp.Query:
        """Q' of a query without ORDER BY … LIMIT of its own (a set operation's branches
        each rewritten)."""
        if isinstance(query, exp.Subquery):
            return self.body(query.this)
        if isinstance(query, exp.SetOperation):
            if query.args.get("limit") is not None or query.args.get("offset") is not None:
                return self.ranked(query)
            query.set("this", self.body(query.this))
            query.set("expression", self.body(query.expression))
            return query
        if not isinstance(query, exp.Select):
            construct = self.ctx.locator.describe(query.key.upper(), query)
            raise UnsupportedSQL(f"{construct} in a LATERAL subquery is not supported")
        if query.args.get("limit") is not None or query.args.get("offset") is not None:
            return self.ranked(query)
        return self.select(query)

    def select(self, select: exp.Select) -> exp.Select:
        """Q' of one SELECT: the domain read first, its columns output and grouped by."""
        self._check(select)
        grouped = select.args.get("group") is not None
        if not grouped and (select.args.get("having") is not None
                            or any(has_aggregate(e) for e in select.expressions)):
            return self.global_aggregate(select)
        select = self.bind(select)
        self._add_domain(select)
        select.set("expressions", [*select.expressions, *self.domain_outputs()])
        if grouped:
            group = select.args["group"]
            group.set("expressions", [*group.expressions,
                                      *(self.domain_column(d) for d in self.columns.values())])
        distinct = select.args.get("distinct")
        if distinct is not None and distinct.args.get("on") is not None:
            on = distinct.args["on"]
            on.set("expressions", [*on.expressions,
                                   *(self.domain_column(d) for d in self.columns.values())])
        for node in list(in_scope(select)):
            if isinstance(node, exp.Window):
                node.set("partition_by", [*(node.args.get("partition_by") or []),
                                          *(self.domain_column(d) for d in self.columns.values())])
        return select

    def _add_domain(self, select: exp.Select) -> None:
        """``select`` reading the domain first, its own FROM items joined after it: on the
        WHERE conjuncts that read only the domain and the first item (``o.cust = D.d``,
        so the join has its key), else cross joined."""
        from_ = select.args.get("from_") or select.args.get("from")
        table = exp.Table(this=exp.to_identifier(self.domain))
        joins = list(select.args.get("joins") or [])
        if from_ is not None:
            first = from_.this
            where = select.args.get("where")
            moved: list[exp.Expression] = []
            kept: list[exp.Expression] = []
            readable = {self.domain, first.alias_or_name}
            for term in conjuncts(where.this) if where is not None else []:
                tables = {c.table for c in term.find_all(exp.Column)}
                movable = self.domain in tables and tables <= readable
                (moved if movable and term.find(exp.Query) is None else kept).append(term)
            if moved:
                joins.insert(0, exp.Join(this=first, on=exp.and_(*moved)))
                select.set("where", exp.Where(this=exp.and_(*kept)) if kept else None)
            else:
                joins.insert(0, exp.Join(this=first, kind="CROSS"))
        select.set("from_", exp.From(this=table))
        select.set("joins", joins)

    def _check(self, select: exp.Select) -> None:
        """UnsupportedSQL for what the rewrite cannot carry: a correlated reference inside a
        derived table or CTE, RIGHT or FULL joins, grouping sets."""
        sources = [select.args.get("with_"), *(j.this for j in select.args.get("joins") or [])]
        from_ = select.args.get("from_") or select.args.get("from")
        if from_ is not None:
            sources.append(from_.this)
        for source in sources:
            if source is None:
                continue
            for column in source.find_all(exp.Column):
                if column.table and column.table not in self.own:
                    construct = self.ctx.locator.describe("correlated reference", column)
                    raise UnsupportedSQL(
                        f"{construct} inside a derived table or CTE of a LATERAL subquery "
                        "is not supported"
                    )
        for join_ in select.args.get("joins") or []:
            side = (join_.args.get("side") or "").upper()
            if side in ("RIGHT", "FULL"):
                construct = self.ctx.locator.describe(f"{side} JOIN", join_)
                raise UnsupportedSQL(
                    f"{construct} inside a correlated LATERAL subquery is not supported"
                )
        group = select.args.get("group")
        if not plain_group(group) and not group.args.get("all"):
            sets = (exp.Rollup, exp.Cube, exp.GroupingSets)
            element = next(e for e in group.expressions if isinstance(e, sets))
            name = "GROUPING SETS" if isinstance(element, exp.GroupingSets) else element.key
            construct = self.ctx.locator.describe(name.upper(), element)
            raise UnsupportedSQL(f"{construct} in a correlated LATERAL subquery is not supported")

    def global_aggregate(self, select: exp.Select) -> exp.Select:
        """An aggregate without GROUP BY: one row per domain value, rows or none.

        SELECT f(calls), d FROM D LEFT JOIN (SELECT calls, d FROM D, … GROUP BY d) AS g
        ON d ≡ g.d [WHERE having]: a call reads g's column (COUNT: 0 when g has no row).
        """
        found = [c for e in [*select.expressions, select.args.get("having")]
                 if e is not None for c in calls_in(e)]
        calls: dict[str, tuple[str, exp.Expression]] = {}
        for call in found:
            calls.setdefault(call.sql(dialect="duckdb"), (f"__ivm_call{len(calls)}", call))
        for node in in_scope(select):
            if isinstance(node, exp.Window):
                construct = self.ctx.locator.describe("window function", node)
                raise UnsupportedSQL(
                    f"{construct} in a correlated LATERAL subquery with aggregates and no "
                    "GROUP BY is not supported"
                )
        inner = exp.Select(expressions=[exp.alias_(c.copy(), n) for n, c in calls.values()])
        for key in ("from_", "joins", "where"):
            if select.args.get(key) is not None:
                inner.set(key, select.args[key].copy())
        inner = self.bind(inner)
        self._add_domain(inner)
        inner.set("expressions", [*inner.expressions, *self.domain_outputs(),
                                  exp.alias_(exp.true(), MATCHED)])
        inner.set("group", exp.Group(
            expressions=[self.domain_column(d) for d in self.columns.values()]))

        def over_grouped(expression: exp.Expression) -> exp.Expression:
            def swap(node: exp.Expression) -> exp.Expression:
                entry = calls.get(node.sql(dialect="duckdb"))
                if entry is None:
                    return node
                column = exp.column(entry[0], table=GROUPED)
                if counts_over_no_rows(node):  # a domain value with no group: 0
                    return exp.Coalesce(this=column, expressions=[exp.Literal.number(0)])
                return column

            return self.bind(expression.copy().transform(swap))

        outer = exp.Select(expressions=[over_grouped(e) for e in select.expressions])
        outer.set("expressions", [*outer.expressions, *self.domain_outputs()])
        outer.set("from_", exp.From(this=exp.Table(this=exp.to_identifier(self.domain))))
        match = and_all([
            exp.NullSafeEQ(this=self.domain_column(d),
                           expression=self.domain_column(d, GROUPED))
            for d in self.columns.values()
        ])
        grouped = exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(GROUPED)))
        outer.set("joins", [exp.Join(this=grouped, side="LEFT", on=match)])
        having = select.args.get("having")
        if having is not None:
            outer.set("where", exp.Where(this=over_grouped(having.this)))
        if select.args.get("distinct") is not None:
            outer.set("distinct", select.args["distinct"].copy())
        return outer

    def ranked(self, query: exp.Query) -> exp.Select:
        """``query``'s ORDER BY … LIMIT / OFFSET per domain value: the rest of the query
        (its ORDER BY terms outside its SELECT list as hidden columns), ranked by
        ``row_number()`` over each domain value's rows."""
        outputs = [(s.alias_or_name, s.unalias()) for s in query.selects]
        is_select = isinstance(query, exp.Select)
        plain = is_select and query.args.get("distinct") is None
        ordering = ordering_of(self.ctx, query, outputs, can_hide=plain)
        assert ordering is not None
        if ordering.unordered is not None:  # one-row queries lost theirs (limit_in_exists)
            raise unordered_refusal(self.ctx, ordering, None)
        body = query.copy()
        for key in ("order", "limit", "offset"):
            body.set(key, None)
        width = len(outputs)
        if ordering.hidden:
            assert isinstance(body, exp.Select)
            body.set("expressions", [*body.expressions, *(
                exp.alias_(e.copy(), HIDDEN_COLUMN.format(i))
                for i, (_, e) in enumerate(ordering.hidden))])
        inner = self.body(body)
        # The inner query's columns: values, hidden, then the domain's.
        names = list(inner.named_selects)
        domain = names[len(names) - len(self.columns):]
        renamed = exp.Select()
        source = exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(WRAPPED)))
        renamed.set("from_", exp.From(this=source))
        terms = [
            exp.Ordered(this=exp.column(names[p], table=WRAPPED), desc=descending,
                        nulls_first=nulls_first)
            for p, descending, nulls_first in ordering.terms
        ]
        terms += [exp.Ordered(this=exp.column(n, table=WRAPPED), desc=False, nulls_first=False)
                  for n in names[:width]]
        window = exp.Window(
            this=exp.RowNumber(),
            partition_by=[exp.column(d, table=WRAPPED) for d in domain],
            order=exp.Order(expressions=terms),
        )
        rank = exp.paren(window)
        low = exp.GT(this=rank, expression=exp.Literal.number(ordering.offset))
        if ordering.limit is not None:
            high = exp.LTE(this=rank.copy(),
                           expression=exp.Literal.number(ordering.offset + ordering.limit))
            renamed.set("qualify", exp.Qualify(this=exp.and_(low, high)))
        else:
            renamed.set("qualify", exp.Qualify(this=low))
        renamed.set("expressions", [
            exp.alias_(exp.column(n, table=WRAPPED), n) for n in [*names[:width], *domain]
        ])
        return renamed
