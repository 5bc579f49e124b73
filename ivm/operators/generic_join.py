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
from ivm.operators.generic_join_rules import Read, Reads, RuleRun, projected
from ivm.operators.join import Join, conjuncts, fused_join
from ivm.operators.join_hypergraph import Extension, JoinShape, Rule
from ivm.operators.project import ProjectOperator
from ivm.operators.reads import read_sql
from ivm.plan.sql import join_sql, sql_of, union_all_sql
from ivm.schema import Column, Schema, quote


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
                run.append(self, count.role, projected(delta, count.columns, count.schema.names))
        if run.backfill:
            # Every old version is empty: the change is the join of the inputs' contents,
            # one static query, which DuckDB's own join runs fastest (the generic join's
            # last rule gives the same rows; measured 5-10x slower on bench_wcoj's graph).
            if any(d is None for d in deltas):
                return None
            schemas = [i.schema for i in self.inputs]
            return join_sql(deltas, schemas, self.join.condition, True)  # type: ignore[arg-type]
        runs = [RuleRun(self, run, r, deltas).steps() for r in self.rules if deltas[r.changed]]
        terms = [t for t in self._in_lockstep(run, runs) if t is not None]
        if not terms:
            return None
        return terms[0] if len(terms) == 1 else union_all_sql(terms)

    def _in_lockstep(self, run: Run, rules: list[Reads]) -> list[str | None]:
        """Every rule's term, the rules advanced together: each round serves the reads all
        of them ask for next at once (``read_all``)."""
        terms: list[str | None] = []
        asks: dict[int, list[Read]] = {}
        for n, rule in enumerate(rules):
            try:
                asks[n] = next(rule)
            except StopIteration as done:
                terms.append(done.value)
        rounds = 0
        while asks:
            order = list(asks)
            answers = self.read_all(run, [r for n in order for r in asks[n]], f"{rounds}_")
            rounds += 1
            for n in order:
                mine, answers = answers[:len(asks[n])], answers[len(asks[n]):]
                try:
                    asks[n] = rules[n].send(mine)
                except StopIteration as done:
                    terms.append(done.value)
                    del asks[n]
        return terms

    def read_all(self, run: Run, reads: list[Read], part: str = "") -> list[str]:
        """SQL of each read, one lookup per trace and key: reads of one count trace, or of
        inputs that are renamings of one relation (a self-join's roles) by the same
        columns, are served by one read at the union of their keys (a scratch table named
        after ``part``)."""
        groups: dict[tuple[object, ...], list[int]] = {}
        for n, read in enumerate(reads):
            groups.setdefault(self._group(read), []).append(n)
        answers = [""] * len(reads)
        for g, members in enumerate(groups.values()):
            first = reads[members[0]]
            keys = " UNION ".join(
                f"SELECT * FROM ({reads[m].keys}) AS __u{k}" for k, m in enumerate(members)
            )
            if first.count:
                count = self.counts[(first.input, first.key)]
                names = tuple(count.schema.names)
                sql = run.read(self, count.role, At(names, keys, nulls=False), live=True)
                sql = self._shared(run, sql, len(members), f"{part}{g}")
                for m in members:
                    answers[m] = sql
                continue
            op = self.inputs[first.input]
            columns = tuple(self.shape.columns_of(first.input)[a] for a in first.key)
            at = At(columns, keys, nulls=False)
            rows = op.integral_at(run, at)
            if rows is None:
                rows = read_sql(run.integral(op), op.schema.names, at)
            rows = self._shared(run, rows, len(members), f"{part}{g}")
            for m in members:
                names = self.inputs[reads[m].input].schema.names
                answers[m] = rows if names == op.schema.names else (
                    "SELECT " + ", ".join(f"{quote(a)} AS {quote(b)}"
                                          for a, b in zip(op.schema.names, names, strict=True))
                    + f", __w FROM ({rows}) AS __g"
                )
        return answers

    def _shared(self, run: Run, rows: str, readers: int, part: str) -> str:
        """``rows`` (a read), materialized when several rules read it: a read's SQL repeats
        its keys' SQL, and DuckDB plans statements holding several such unions slowly."""
        return rows if readers < 2 else run.materialize(self, f"read{part}", rows)

    def _group(self, read: Read) -> tuple[object, ...]:
        """Reads answered together: of one count trace; of one relation by one key."""
        if read.count:
            return ("count", self.counts[(read.input, read.key)].role)
        op = self.inputs[read.input]
        columns = tuple(self.shape.columns_of(read.input)[a] for a in read.key)
        origin, all_columns = _origin(op, tuple(op.schema.names))
        if len(set(all_columns)) != len(all_columns):
            return ("rows", read.input, columns)
        return ("rows", origin, all_columns, _origin(op, columns)[1])

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


def _attrs(attributes: Sequence[int]) -> str:
    return ", ".join(f"A{a}" for a in attributes)


def _origin(op: Operator, columns: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """Where ``columns`` of ``op`` come from through renaming projections: the operator
    below them and its columns (a self-join's roles share their table's)."""
    while isinstance(op, ProjectOperator):
        origins = [op.column_origin(c) for c in columns]
        if any(o is None for o in origins):
            break
        columns, op = tuple(origins), op.inputs[0]  # type: ignore[arg-type]
    return op.fingerprint, columns
