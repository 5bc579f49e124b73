"""Inner join of n inputs as worst-case-optimal delta queries (count, propose, validate).

Meaning: the same as ``ivm.operators.join.Join``: (r₁‥rₙ) with weight w₁·…·wₙ where
the condition holds. Incremental form: the delta query of dogsdogsdogs,

    Δ join = Σᵢ ΔRᵢ ⋈ R₁..ᵢ₋₁(new) ⋈ Rᵢ₊₁..ₙ(old),

each term computed as a *generic join* (``ivm.operators.join_hypergraph``): the
distinct values of ΔRᵢ's join attributes are the first prefixes; each further
attribute extends every prefix at once: each input holding it (and a bound attribute)
*counts* its extensions per prefix, the one with fewest *proposes* them, the others
*validate* each (prefix, value). Work follows the smallest proposer per prefix (the
worst-case-optimal bound), never a binary plan's 2-paths through a high-degree node.
Finally each input's rows at the bound attributes are joined in, weights multiplied,
and the residual conditions applied. Inputs before i are read new (old ⊎ their
change), inputs after it old: changes to several inputs (or several roles of one
self-joined table) in one epoch each count once (the seeds' ``(T, bool)`` moments).

Everything is vectorized over the whole change: one DuckDB statement per step over
the slices looked up through ``Run`` (``integral_at``: an arrangement by that key in
the embedded session, shared with every operator reading it so; SQL over the traces
in Spark mode and while a view fills). No intermediate join result is kept.

State: per (input, prefix key) the input counts by, the *count trace*: the input's
rows projected to the key's columns, with their weights (a Z-set; read live at keys,
it is each prefix's number of rows). Inputs that are renamings of one relation (a
self-join's roles) share one. Partitioned, the operator runs in one place: a cyclic
join has no single key its inputs can be co-partitioned by.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from ivm.operators.base import At, Operator, Run, TraceSpec
from ivm.operators.join import Join, conjuncts, fused_join
from ivm.operators.join_hypergraph import Extension, JoinShape, Rule
from ivm.operators.project import ProjectOperator
from ivm.operators.reads import read_sql
from ivm.plan.sql import W, column_list, join_sql, sql_of, union_all_sql
from ivm.schema import Column, Schema, quote


def attr(a: int) -> str:
    """Column name of attribute ``a`` in a prefix table."""
    return f"__a{a}"


@dataclass(frozen=True)
class CountTrace:
    """A count trace: role ``role`` holds input ``input``'s ``columns`` as ``k0..``."""

    role: str
    input: int
    columns: tuple[str, ...]
    schema: Schema


@dataclass(frozen=True, eq=False)
class GenericJoin(Operator):
    """Inner join of a cyclic equi-join hypergraph as worst-case-optimal delta queries."""

    kind = "wcoj"

    @property
    def join(self) -> Join:
        """The join's plan node."""
        assert isinstance(self.node, Join)
        return self.node

    @cached_property
    def shape(self) -> JoinShape:
        """The join's attributes and residual conditions."""
        shape = JoinShape.of([i.schema.names for i in self.inputs], conjuncts(self.join.condition))
        assert shape is not None and shape.connected(), "planned only for connected joins"
        return shape

    @cached_property
    def order(self) -> tuple[int, ...]:
        """The global attribute order each rule follows after its own attributes."""
        return self.shape.global_order()

    @cached_property
    def rules(self) -> tuple[Rule, ...]:
        """One delta rule per input."""
        return tuple(self.shape.rule(i, self.order) for i in range(len(self.inputs)))

    @cached_property
    def counts(self) -> dict[tuple[int, tuple[int, ...]], CountTrace]:
        """The count trace of each (input, prefix key) some step counts by."""
        shared: dict[tuple[str, tuple[str, ...]], CountTrace] = {}
        result = {}
        for rule in self.rules:
            for step in rule.steps:
                if len(step.participants) < 2:
                    continue
                for j, prefix in step.participants:
                    prefix = self.key_of(j, prefix)
                    columns = tuple(self.shape.columns_of(j)[a] for a in prefix)
                    origin = _origin(self.inputs[j], columns)
                    if origin not in shared:
                        schema = Schema(tuple(
                            Column(f"k{m}", self.inputs[j].schema.type_of(c))
                            for m, c in enumerate(columns)
                        ))
                        shared[origin] = CountTrace(f"count{len(shared)}", j, columns, schema)
                    result[(j, prefix)] = shared[origin]
        return result

    def key_of(self, j: int, attributes: Sequence[int]) -> tuple[int, ...]:
        """``attributes`` in the order of their columns in input ``j`` (so every read of
        one input by one set of columns uses one arrangement)."""
        names = self.inputs[j].schema.names
        columns = self.shape.columns_of(j)
        return tuple(sorted(attributes, key=lambda a: names.index(columns[a])))

    @cached_property
    def attribute_only(self) -> tuple[bool, ...]:
        """Per input: whether all its columns are join attributes (distinct columns): then
        a (prefix, value) validated or proposed gives its rows there, and their weight."""
        return tuple(
            sorted(op.schema.names) == sorted(self.shape.columns_of(j).values())
            for j, op in enumerate(self.inputs)
        )

    # -- declarations ------------------------------------------------------------------------

    def traces(self) -> tuple[TraceSpec, ...]:
        unique = {c.role: c for c in self.counts.values()}
        return tuple(TraceSpec(c.role, c.schema, tuple(c.schema.names)) for c in unique.values())

    def input_keys(self) -> tuple[tuple[str, ...] | None, ...]:
        return tuple(() for _ in self.inputs)

    def reads_integrals(self) -> tuple[bool, ...]:
        return tuple(True for _ in self.inputs)

    # -- computation -------------------------------------------------------------------------

    def change(self, run: Run) -> str | None:
        deltas: list[str | None] = [run.change(i) for i in self.inputs]
        if all(d is None for d in deltas):
            return None
        deltas = [
            run.materialize(self, f"delta{i}", d) if d is not None and fused_join(op) else d
            for i, (op, d) in enumerate(zip(self.inputs, deltas, strict=True))
        ]
        for count in {c.role: c for c in self.counts.values()}.values():
            delta = deltas[count.input]
            if delta is not None:
                run.append(self, count.role, _projected(delta, count.columns, count.schema.names))
        # While a view fills, every old version is empty: a rule reading an input after
        # its own (old) gives nothing, so only the last input's rule runs.
        rules = self.rules[-1:] if run.backfill else self.rules
        terms = [
            term for rule in rules
            if deltas[rule.changed] is not None
            and (term := _RuleRun(self, run, rule, deltas).output()) is not None
        ]
        if not terms:
            return None
        return terms[0] if len(terms) == 1 else union_all_sql(terms)

    def integral(self, run: Run) -> str:
        olds = [run.integral(i) for i in self.inputs]
        return join_sql(olds, [i.schema for i in self.inputs], self.join.condition, True)

    # -- explain -----------------------------------------------------------------------------

    def label(self) -> str:
        on = sql_of(self.join.condition) if self.join.condition is not None else "true"
        return (
            f"WorstCaseOptimalJoin of {len(self.inputs)} inputs on {on} (state: a count "
            f"trace per (input, prefix key); no intermediate results; partitioned: one place)"
        )

    def nested_lines(self) -> list[str]:
        shape = self.shape
        names = [", ".join(c for _, c in members) for members in shape.attributes]
        lines = [f"attribute A{a} = {{{names[a]}}}" for a in range(len(names))]
        lines.append("attribute order: " + ", ".join(f"A{a}" for a in self.order))
        if shape.residual:
            lines.append("residual: " + " AND ".join(sql_of(c) for c in shape.residual))
        for rule in self.rules:
            i = rule.changed
            lines.append(
                f"rule Δ{self._name(i)} (inputs before it new, after it old): "
                f"binds {_attrs(rule.bound)}; order {_attrs(rule.order)}"
            )
            for step in rule.steps:
                lines.append("  " + self._step_line(step))
        return lines

    def _step_line(self, step: Extension) -> str:
        a = step.attribute
        if len(step.participants) == 1:
            j, prefix = step.participants[0]
            return f"extend A{a}: {self._name(j)} by [{_attrs(prefix)}] proposes alone"
        counted = ", ".join(f"{self._name(j)} by [{_attrs(p)}]" for j, p in step.participants)
        checks = ", ".join(f"{self._name(j)} at [{_attrs((*p, a))}]" for j, p in step.participants)
        return (
            f"extend A{a}: count {counted}; the fewest per prefix proposes; "
            f"the others validate ({checks})"
        )

    def _name(self, i: int) -> str:
        return f"in{i}[{', '.join(self.inputs[i].schema.names)}]"


class _RuleRun:
    """One delta rule computed for one epoch (see the module docstring).

    A *prefix relation* has a column ``__a<b>`` per bound attribute b and, per input
    already *covered* (all its columns are attributes, every one bound, its rows' summed
    weight there found while proposing or validating), that weight as ``__m<j>``."""

    def __init__(
        self, op: GenericJoin, run: Run, rule: Rule, deltas: Sequence[str | None]
    ) -> None:
        self.op, self.run, self.rule, self.deltas = op, run, rule, deltas
        self.shape = op.shape
        self.covered: list[int] = []

    def output(self) -> str | None:
        """SQL of this rule's term, or None when no prefix survives."""
        i = self.rule.changed
        delta = self.deltas[i]
        assert delta is not None
        mine = self.shape.columns_of(i)
        select = ", ".join(f"{quote(mine[a])} AS {attr(a)}" for a in self.rule.bound)
        not_null = " AND ".join(f"{quote(mine[a])} IS NOT NULL" for a in self.rule.bound)
        prefixes = f"SELECT DISTINCT {select} FROM ({delta}) AS __d WHERE {not_null}"
        bound = list(self.rule.bound)
        steps = self.rule.steps
        for s, step in enumerate(steps):
            prefixes = self._extend(s, step, prefixes, bound)
            bound.append(step.attribute)
            if self.run.is_empty(prefixes):  # no candidate: nothing to validate
                return None
            if s < len(steps) - 1 or len(self.covered) < len(self.op.inputs) - 1:
                prefixes = self.run.materialize(self.op, f"r{i}s{s}", prefixes)
                if self.run.is_empty(prefixes):
                    return None
        return self._rows_joined(prefixes, bound)

    # -- reads at a version ------------------------------------------------------------------

    def _new(self, j: int) -> bool:
        return j < self.rule.changed and self.deltas[j] is not None

    def _keys(self, j: int, attributes: Sequence[int], source: str, where: str = "") -> str:
        """SQL: the distinct values of ``attributes`` (in input ``j``'s column order) in the
        prefix relation ``source`` (``where``: a condition on its rows)."""
        key = self.op.key_of(j, attributes)
        return f"SELECT DISTINCT {_attr_list(key)} FROM ({source}) AS __k {where}"

    def _rows(self, j: int, attributes: Sequence[int], source: str, where: str = "") -> str:
        """Input ``j``'s rows (its columns, ``__w``) whose ``attributes`` equal a prefix's of
        ``source``, at the version this rule reads it (NULL matches nothing)."""
        key = self.op.key_of(j, attributes)
        at = At(tuple(self.shape.columns_of(j)[a] for a in key),
                self._keys(j, key, source, where), nulls=False)
        op = self.op.inputs[j]
        rows = op.integral_at(self.run, at)
        if rows is None:
            rows = read_sql(self.run.integral(op), op.schema.names, at)
        if self._new(j):
            delta = self.deltas[j]
            assert delta is not None
            rows = union_all_sql([rows, read_sql(delta, op.schema.names, at)])
        return rows

    def _counts(self, j: int, prefix: tuple[int, ...], source: str, alias: str) -> str:
        """A join of the prefixes ``__p`` with input ``j``'s number of rows at each of them
        (``alias.__n``): SQL ``(…) AS alias ON …`` (prefixes of ``source`` are looked up)."""
        prefix = self.op.key_of(j, prefix)
        count = self.op.counts[(j, prefix)]
        names = tuple(count.schema.names)
        at = At(names, self._keys(j, prefix, source), nulls=False)
        rows = self.run.read(self.op, count.role, at, live=True)
        if self._new(j):
            delta = self.deltas[j]
            assert delta is not None
            columns = [self.shape.columns_of(j)[a] for a in prefix]  # this role's own
            rows = union_all_sql([rows, read_sql(_projected(delta, columns, names), names, at)])
        k = column_list(names)
        on = " AND ".join(f"{alias}.k{m} = __p.{attr(b)}" for m, b in enumerate(prefix))
        return (f"(SELECT {k}, SUM({W}) AS __n FROM ({rows}) AS __r GROUP BY {k}) AS {alias} "
                f"ON {on}")

    # -- one extension -----------------------------------------------------------------------

    def _covers(self, j: int, prefix: tuple[int, ...], a: int) -> bool:
        """True when binding ``a`` after ``prefix`` binds every column of input ``j``."""
        return self.op.attribute_only[j] and set(self.shape.columns_of(j)) == {*prefix, a}

    def _extend(self, s: int, step: Extension, prefixes: str, bound: list[int]) -> str:
        """SQL of the prefix relation extended by ``step``'s attribute."""
        i, a = self.rule.changed, step.attribute
        kept = [attr(b) for b in bound] + [f"__m{j}" for j in self.covered]
        carried = ", ".join(f"__p.{c}" for c in kept)
        parts = step.participants
        if len(parts) == 1:
            j, prefix = parts[0]
            proposed = self._proposed(j, prefix, a, prefixes, carried, "", "")
            if self._covers(j, prefix, a):
                self.covered.append(j)
                return proposed.replace(" AS __mp ", f" AS __m{j} ", 1)
            return proposed
        scored = self.run.materialize(
            self.op, f"r{i}s{s}c",
            f"SELECT {carried}, {_argmin([f'__c{k}.__n' for k in range(len(parts))])} AS __win "
            f"FROM ({prefixes}) AS __p "
            + " ".join(f"JOIN {self._counts(j, p, prefixes, f'__c{k}')}"
                       for k, (j, p) in enumerate(parts)),
        )
        if self.run.is_empty(scored):
            return scored
        # Materialized: the validators look up its (prefix, value) pairs, and a read's
        # SQL repeats its keys' SQL (nesting the proposals' would grow the text).
        candidates = self.run.materialize(self.op, f"r{i}s{s}x", union_all_sql([
            self._proposed(j, p, a, scored, f"{carried}, __p.__win", f"WHERE __win = {k}",
                           f"AND __p.__win = {k}")
            for k, (j, p) in enumerate(parts)
        ]))
        if self.run.is_empty(candidates):
            return candidates
        joins, checks, weights = [], [], []
        for k, (j, prefix) in enumerate(parts):
            on = self.op.key_of(j, (*prefix, a))
            columns = [self.shape.columns_of(j)[b] for b in on]
            rows = self._rows(j, on, candidates, f"WHERE __win <> {k}")
            match = " AND ".join(f"__v{k}.{quote(c)} = __x.{attr(b)}"
                                 for c, b in zip(columns, on, strict=True))
            joins.append(
                f"LEFT JOIN (SELECT {column_list(columns)}, SUM({W}) AS __s FROM ({rows}) AS __v "
                f"GROUP BY ALL HAVING SUM({W}) > 0) AS __v{k} ON {match}"
            )
            checks.append(f"(__x.__win = {k} OR __v{k}.__s IS NOT NULL)")
            if self._covers(j, prefix, a):
                weights.append(f"CASE WHEN __x.__win = {k} THEN __x.__mp ELSE __v{k}.__s END "
                               f"AS __m{j}")
        self.covered.extend(j for j, p in parts if self._covers(j, p, a))
        select = ", ".join([*(f"__x.{c}" for c in kept), f"__x.{attr(a)}", *weights])
        return (f"SELECT {select} FROM ({candidates}) AS __x {' '.join(joins)} "
                f"WHERE {' AND '.join(checks)}")

    def _proposed(
        self, j: int, prefix: tuple[int, ...], a: int, prefixes: str, carried: str,
        keys_where: str, where: str,
    ) -> str:
        """SQL: each prefix of ``prefixes`` (``where`` picks them; ``keys_where`` the same on
        the keys looked up) with every value of attribute ``a`` input ``j`` holds at it
        (live rows only), and their summed weight ``__mp``."""
        mine = self.shape.columns_of(j)
        on = " AND ".join(f"__r.{quote(mine[b])} = __p.{attr(b)}" for b in prefix)
        value = f"__r.{quote(mine[a])}"
        return (
            f"SELECT {carried}, {value} AS {attr(a)}, SUM(__r.{W}) AS __mp "
            f"FROM ({prefixes}) AS __p JOIN ({self._rows(j, prefix, prefixes, keys_where)}) "
            f"AS __r ON {on} WHERE {value} IS NOT NULL {where} GROUP BY ALL "
            f"HAVING SUM(__r.{W}) > 0"
        )

    # -- the rows ----------------------------------------------------------------------------

    def _rows_joined(self, prefixes: str, bound: list[int]) -> str:
        """SQL of the rule's term: every input's rows at the bound prefixes, joined (a
        covered input's from the prefix relation itself)."""
        i = self.rule.changed
        sources = [f"({prefixes}) AS __p"]
        weights = []
        selects = []
        for j, op in enumerate(self.op.inputs):
            mine = self.shape.columns_of(j)
            if j in self.covered:
                attribute_of = {c: b for b, c in mine.items()}
                selects += [f"__p.{attr(attribute_of[c])} AS {quote(c)}" for c in op.schema.names]
                weights.append(f"__p.__m{j}")
                continue
            attributes = [b for b in bound if b in mine]
            rows = self.deltas[i] if j == i else self._rows(j, attributes, prefixes)
            on = " AND ".join(f"__r{j}.{quote(mine[b])} = __p.{attr(b)}" for b in attributes)
            sources.append(f"JOIN ({rows}) AS __r{j} ON {on}")
            weights.append(f"__r{j}.{W}")
            if op.schema.names:
                selects.append(column_list(op.schema.names, f"__r{j}"))
        residual = self.shape.residual
        where = f" WHERE {' AND '.join(sql_of(c) for c in residual)}" if residual else ""
        return (
            f"SELECT {', '.join(selects)}, {' * '.join(weights)} AS {W} "
            f"FROM {' '.join(sources)}{where}"
        )


def _attr_list(attributes: Sequence[int]) -> str:
    return ", ".join(attr(a) for a in attributes)


def _attrs(attributes: Sequence[int]) -> str:
    return ", ".join(f"A{a}" for a in attributes)


def _argmin(values: Sequence[str]) -> str:
    """SQL: the position of the smallest of ``values`` (the first on ties)."""
    cases = [
        f"WHEN {' AND '.join(f'{v} <= {w}' for w in values[k + 1:])} THEN {k}"
        for k, v in enumerate(values[:-1])
    ]
    return f"CASE {' '.join(cases)} ELSE {len(values) - 1} END"


def _projected(rows: str, columns: Sequence[str], names: Sequence[str]) -> str:
    """SQL: ``rows``' ``columns`` named ``names``, with the weight; NULL keys dropped."""
    select = ", ".join(f"{quote(c)} AS {quote(n)}" for c, n in zip(columns, names, strict=True))
    not_null = " AND ".join(f"{quote(c)} IS NOT NULL" for c in columns)
    return f"SELECT {select}, {W} FROM ({rows}) AS __s WHERE {not_null}"


def _origin(op: Operator, columns: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """Where ``columns`` of ``op`` come from through renaming projections: the operator
    below them and its columns (a self-join's roles share their table's)."""
    while isinstance(op, ProjectOperator):
        origins = [op.column_origin(c) for c in columns]
        if any(o is None for o in origins):
            break
        columns, op = tuple(origins), op.inputs[0]  # type: ignore[arg-type]
    return op.fingerprint, columns
