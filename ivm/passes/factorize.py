"""Plan pass: a GROUP BY over an acyclic join, its aggregates pushed below the joins.

Seed 003 (FAQ / InsideOut): ``SUM(a.v * b.v * c.v) … FROM a ⋈ b ⋈ c GROUP BY a.i,
c.k`` is a sum over the join variables of a product of factors, one per table, and
each variable the output does not keep can be summed away as soon as the tables that
mention it are joined. Over a join tree rooted at one table, each other table ``R``
becomes a *factor*: R joined with its children's factors, grouped by the columns R
joins its parent on and the group keys of its subtree, holding

* ``n``: the join rows of the subtree behind each factor row (COUNT(*) of the subtree);
* per SUM, the sum over those rows of the product of that SUM's terms in the subtree
  (``n`` stands in where the subtree has none of them);

and the root joins its children's factors and sums the products. Each factor is an
ordinary aggregate over a join, maintained incrementally like any other (F-IVM's view
tree): a change to a table changes its factor's touched rows only, and travels up one
join per level, never through the whole fan-out of the flat join. State is each
table's rows and one row per factor group: linear in the inputs, where the flat plan's
join of a many-to-many chain is the product of its fan-outs.

Exact by construction where the arithmetic is exact: SUM and COUNT form a ring
(deletions invert), and SQL's NULLs hold (a product with a NULL term is skipped by
SUM in both forms; a subtree whose terms are all NULL gives a NULL partial, skipped
above). So only integer and DECIMAL sums are factorized; a float sum would be
rounded in another order (its rows' values, not which rows, could differ) and keeps
the flat plan. Results are cast back to the flat plan's types.

It applies to an ``Aggregate`` over a projection of an inner ``Join`` (or a filter
over one) whose condition is equalities of columns of two tables and predicates of
one table, whose tables form a tree, whose keys are columns and whose calls are
``SUM(product of one-table terms)``, ``COUNT(*)`` and ``COUNT(column)``. ``"flat"``
(the session's default) never factorizes; ``"auto"`` factorizes where the flat join
fans out: some join edge has neither side on a base table's primary key (a
key/foreign-key star keeps the flat plan, whose join already has one row per fact
row); ``"factorized"`` wherever it applies.

Measured (``benchmarks/bench_faq.py``, a four-table chain whose join is 595× its
inputs): creating the view is 2.3× faster factorized (10.8× at 3,913×), but an epoch
is 1.6–1.7× slower embedded and 1.5× slower in Spark mode, because each factor is one
more aggregate and join per epoch (statements, stages) while the flat delta query is
one statement; in Spark mode the factorized state is a third smaller. Hence the
default: factorize on request until the factors of one epoch run as one statement.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp

from ivm.errors import IvmError
from ivm.operators.aggregate import Aggregate, AggregateCall
from ivm.operators.filter import Filter
from ivm.operators.join import Join, conjuncts
from ivm.operators.project import Project
from ivm.passes.join_trees import JoinTree
from ivm.plan.node import Plan
from ivm.plan.sql import empty_relation
from ivm.schema import Schema

AGGREGATE_PLANS = ("flat", "auto", "factorized")
"""The plans ``aggregate_plan`` may ask for."""

Describe = Callable[[str], Schema]
EXACT_PREFIXES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT",
                  "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT", "DECIMAL")
"""Types whose sums are exact in any order."""


@dataclass(frozen=True)
class AggregatePlan:
    """What a view asks of its aggregates over joins: ``choice`` (one of
    ``AGGREGATE_PLANS``) and the base tables' primary keys, by table name."""

    choice: str = "flat"
    keys: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)


def factorize(plan: Plan, describe: Describe, aggregate_plan: AggregatePlan) -> Plan:
    """``plan`` with every eligible aggregate over a join factorized (module docstring)."""
    if aggregate_plan.choice not in AGGREGATE_PLANS:
        raise ValueError(f"aggregate_plan must be one of {AGGREGATE_PLANS}")
    if aggregate_plan.choice == "flat":
        return plan
    done: dict[int, Plan] = {}
    for node in plan.walk():
        rebuilt = node.with_children([done[id(c)] for c in node.children()])
        if isinstance(rebuilt, Aggregate) and type(rebuilt) is Aggregate:
            rebuilt = _factorized(rebuilt, describe, aggregate_plan) or rebuilt
        done[id(node)] = rebuilt
    return done[id(plan)]


def _factorized(node: Aggregate, describe: Describe, options: AggregatePlan) -> Plan | None:
    """``node`` factorized, or None where the pass does not apply. Should DuckDB not type
    a factor (a DECIMAL product whose scale passes 38 in another order than the flat
    plan's), the flat plan stays: it raises what it raises."""
    try:
        return _Factorizer(node, describe, options).plan()
    except IvmError:
        return None


@dataclass
class _Call:
    """One aggregate call: its terms by table (a product each), and its constant terms."""

    call: AggregateCall
    terms: dict[int, list[exp.Expression]]
    constants: list[exp.Expression]


class _Factorizer:
    """Factorizes one aggregate, or finds it does not apply (``plan()`` is None)."""

    def __init__(self, node: Aggregate, describe: Describe, options: AggregatePlan) -> None:
        self.node = node
        self.describe = describe
        self.options = options

    def plan(self) -> Plan | None:
        project = self.node.input
        if not isinstance(project, Project) or not self.node.keys:
            return None
        join, predicate = project.input, None
        if isinstance(join, Filter):
            join, predicate = join.input, join.predicate
        if not isinstance(join, Join) or len(join.relations) < 2:
            return None
        tree = JoinTree.of(join.relations, [*conjuncts(join.condition), *conjuncts(predicate)])
        if tree is None:
            return None
        self.tree = tree
        self.alias = _aliases(join.relations)
        self.exprs = dict(project.exprs)
        if not self._read_keys() or not self._read_calls():
            return None
        if not tree.rooted(list(self.key_table.values())):
            return None
        if self.options.choice == "auto" and not tree.fans_out(self.options.keys):
            return None
        return self._build()

    # -- reading the aggregate ---------------------------------------------------------------

    def _read_keys(self) -> bool:
        self.key_table: dict[str, int] = {}
        for key in self.node.keys:
            expression = self.exprs.get(key)
            if not isinstance(expression, exp.Column) or expression.name not in self.tree.owner:
                return False
            self.key_table[key] = self.tree.owner[expression.name]
        return True

    def _read_calls(self) -> bool:
        self.calls: list[_Call] = []
        for call in self.node.calls:
            if call.distinct or call.filter or call.order or call.constants:
                return False
            if call.func == "count_star":
                self.calls.append(_Call(call, {}, []))
                continue
            if call.func not in ("sum", "count") or len(call.args) != 1:
                return False
            expression = self.exprs.get(call.args[0])
            if expression is None:
                return False
            if call.func == "count":
                tables = self.tree.tables_of(expression)
                if tables is None or len(tables) != 1:
                    return False
                counted = exp.Cast(
                    this=exp.Not(this=exp.Is(this=exp.Paren(this=expression.copy()),
                                             expression=exp.Null())),
                    to=exp.DataType.build("INTEGER"))
                self.calls.append(_Call(call, {next(iter(tables)): [counted]}, []))
                continue
            if not _exact(self.node.input.schema.type_of(call.args[0])):
                return False
            read = self._product(expression)
            if read is None:
                return False
            self.calls.append(_Call(call, *read))
        return True

    def _product(
        self, expression: exp.Expression
    ) -> tuple[dict[int, list[exp.Expression]], list[exp.Expression]] | None:
        """A product's terms by the one input each reads, and its constant terms."""
        factors: list[exp.Expression] = []
        pending = [expression]
        while pending:
            term = pending.pop()
            while isinstance(term, exp.Paren):
                term = term.this
            if isinstance(term, exp.Mul):
                pending += [term.left, term.right]
            else:
                factors.append(term)
        terms: dict[int, list[exp.Expression]] = {}
        constants = []
        for factor in factors:
            tables = self.tree.tables_of(factor)
            if tables is None or len(tables) > 1:
                return None
            if tables:
                terms.setdefault(next(iter(tables)), []).append(factor)
            else:
                constants.append(factor)
        return terms, constants

    # -- building the factors ----------------------------------------------------------------

    def _count_name(self, table: int) -> str:
        """The column of ``table``'s factor counting its subtree's join rows."""
        return f"__f_{self.alias[table]}_n"

    def _sum_name(self, table: int, index: int) -> str:
        """The column of ``table``'s factor holding call ``index``'s partial sum."""
        return f"__f_{self.alias[table]}_s{index}"

    def _count(self, table: int) -> exp.Expression:
        return exp.Cast(this=_column(self._count_name(table)), to=exp.DataType.build("HUGEINT"))

    def _typed(self, node: Plan) -> Plan:
        inputs = [empty_relation(c.schema, weighted=False) for c in node.children()]
        return dataclasses.replace(node, schema=self.describe(node.plain(inputs)))

    def _joined(self, table: int, factors: dict[int, Plan]) -> Plan:
        """Input ``table`` (its own predicates applied) joined with its children's factors."""
        relation = self.tree.relations[table]
        if self.tree.local.get(table):
            predicate = _conjunction(self.tree.local[table])
            relation = self._typed(Filter(relation.schema, relation, predicate))
        children = self.tree.children[table]
        if not children:
            return relation
        edges = self.tree.edges
        condition = _conjunction([t for c in children for t in edges[frozenset((table, c))]])
        inputs = (relation, *(factors[c] for c in children))
        return self._typed(Join(relation.schema, inputs, condition))

    def _has_terms(self, index: int, tables: Sequence[int]) -> bool:
        return any(t in self.calls[index].terms for t in tables)

    def _partial(self, index: int, table: int) -> exp.Expression:
        """The sum's value per joined row at ``table``: its terms there times its
        children's partials (their counts where their subtrees have no terms)."""
        call = self.calls[index]
        parts = [exp.Paren(this=t.copy()) for t in call.terms.get(table, [])]
        for child in self.tree.children[table]:
            if self._has_terms(index, self.tree.subtree(child)):
                parts.append(_column(self._sum_name(child, index)))
            else:
                parts.append(self._count(child))
        if table == self.tree.root:
            parts += [exp.Paren(this=c.copy()) for c in call.constants]
        return _product(parts)

    def _factor(self, table: int, factors: dict[int, Plan]) -> Plan:
        joined = self._joined(table, factors)
        subtree = self.tree.subtree(table)
        keys = self.tree.up_columns(table)
        keys += [self.exprs[k].name for k, t in self.key_table.items() if t in subtree]
        keys = list(dict.fromkeys(keys))
        exprs = [(k, _column(k)) for k in keys]
        counts = [self._count(c) for c in self.tree.children[table]]
        values: list[tuple[str, exp.Expression]] = []
        if counts:
            values.append((self._count_name(table), _product(counts)))
        for index in range(len(self.calls)):
            if self._has_terms(index, subtree):
                values.append((self._sum_name(table, index), self._partial(index, table)))
        project = self._typed(Project(joined.schema, joined, (*exprs, *values)))
        calls = [AggregateCall(self._count_name(table), "count_star")] if not counts else []
        calls += [AggregateCall(name, "sum", (name,)) for name, _ in values]
        return self._typed(Aggregate(project.schema, project, tuple(keys), tuple(calls)))

    def _build(self) -> Plan | None:
        factors: dict[int, Plan] = {}
        for table in reversed(self.tree.order):
            if table != self.tree.root:
                factors[table] = self._factor(table, factors)
        joined = self._joined(self.tree.root, factors)
        exprs = [(k, _column(self.exprs[k].name)) for k in self.node.keys]
        for index, call in enumerate(self.calls):
            if call.call.func == "count_star":
                value = _product([self._count(c) for c in self.tree.children[self.tree.root]])
            else:
                value = self._partial(index, self.tree.root)
            exprs.append((call.call.name, value))
        project = self._typed(Project(joined.schema, joined, tuple(exprs)))
        for name, _ in exprs[len(self.node.keys):]:
            if not _exact(project.schema.type_of(name)):
                return None
        calls = tuple(AggregateCall(c.call.name, "sum", (c.call.name,)) for c in self.calls)
        summed = self._typed(Aggregate(project.schema, project, self.node.keys, calls))
        cast = [(k, _column(k)) for k in self.node.keys]
        cast += [(c.name, exp.Cast(this=_column(c.name),
                                   to=exp.DataType.build(self.node.schema.type_of(c.name),
                                                         dialect="duckdb")))
                 for c in self.node.calls]
        result = self._typed(Project(summed.schema, summed, tuple(cast)))
        return result if result.schema == self.node.schema else None


def _exact(type_: str) -> bool:
    return type_.upper().startswith(EXACT_PREFIXES)


def _column(name: str) -> exp.Column:
    return exp.column(exp.to_identifier(name, quoted=True))


def _aliases(relations: Sequence[Plan]) -> dict[int, str]:
    """A name per join input for its factor's columns: the alias its columns carry
    (``b`` of ``b.j``), else its position."""
    found = {}
    for i, relation in enumerate(relations):
        prefixes = {n.split(".", 1)[0] for n in relation.schema.names if "." in n}
        found[i] = prefixes.pop() if len(prefixes) == 1 else str(i)
    if len(set(found.values())) < len(found):
        return {i: str(i) for i in found}
    return found


def _product(parts: Sequence[exp.Expression]) -> exp.Expression:
    if not parts:
        return exp.Cast(this=exp.Literal.number(1), to=exp.DataType.build("HUGEINT"))
    result = parts[0]
    for part in parts[1:]:
        result = exp.Mul(this=result, expression=part)
    return result


def _conjunction(terms: Sequence[exp.Expression]) -> exp.Expression:
    result = terms[0].copy()
    for term in terms[1:]:
        result = exp.And(this=result, expression=term.copy())
    return result
