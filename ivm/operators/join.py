"""Inner join of n inputs, maintained as a delta query.

Meaning: join(R₁..Rₙ) holds (r₁‥rₙ) with weight w₁·…·wₙ where the condition
holds. Incremental form (DBSP, dogsdogsdogs): with Rᵢ the integral before this
epoch and ΔRᵢ this epoch's change,

    Δ join = Σᵢ ΔRᵢ ⋈ R₁..ᵢ₋₁(new) ⋈ Rᵢ₊₁..ₙ(old),    new = old ⊎ Δ.

Earlier inputs are read at their new version and later ones at their old
version, so a change to several inputs in one epoch is neither missed nor
counted twice. Terms whose ΔRᵢ is empty are skipped.

State: none of its own. Each input's integral is read from the traces below it
(a base table's trace, an aggregate's output trace…). Partitioned, a binary
join co-locates its inputs by its equi-keys; without one it runs in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from sqlglot import exp

from ivm.operators.base import At, Operator, Run
from ivm.plan.node import Plan
from ivm.plan.sql import W, column_list, consolidate_sql, join_sql, sql_of, union_all_sql


@dataclass(frozen=True, eq=False)
class Join(Plan):
    """Inner join of any number of inputs on ``condition`` (None: cross product).

    Input column names are unique across inputs; the output is their concatenation.
    """

    relations: tuple[Plan, ...]
    condition: exp.Expression | None

    def plain(self, inputs: Sequence[str]) -> str:
        return join_sql(inputs, [r.schema for r in self.relations], self.condition, False)

    def describe(self) -> str:
        on = sql_of(self.condition) if self.condition is not None else "true"
        return f"Join of {len(self.relations)} inputs on {on}"

    def equi_keys(self) -> list[tuple[str, str]]:
        """Column pairs the condition equates across two different inputs (``=``, or
        ``IS NOT DISTINCT FROM``: equal values hash alike, NULLs too)."""
        if self.condition is None:
            return []
        owner = {c: i for i, r in enumerate(self.relations) for c in r.schema.names}
        pairs = []
        for conjunct in conjuncts(self.condition):
            if isinstance(conjunct, (exp.EQ, exp.NullSafeEQ)) and all(
                isinstance(side, exp.Column) for side in (conjunct.left, conjunct.right)
            ):
                left, right = conjunct.left.name, conjunct.right.name
                if left in owner and right in owner and owner[left] != owner[right]:
                    pairs.append((left, right) if owner[left] < owner[right] else (right, left))
        return pairs


def fused_join(op: Operator) -> bool:
    """True when ``op`` is a join, or operators without state above one: its change is
    SQL text holding the join's delta query, not a table read."""
    if isinstance(op, DeltaJoin):
        return True
    if op.traces() or not op.inputs:
        return False
    return any(fused_join(i) for i in op.inputs)


def conjuncts(condition: exp.Expression | None) -> list[exp.Expression]:
    """The terms of a conjunction, however its ANDs are nested or parenthesized."""
    if condition is None:
        return []
    while isinstance(condition, exp.Paren):
        condition = condition.this
    if isinstance(condition, exp.And):
        return conjuncts(condition.this) + conjuncts(condition.expression)
    return [condition]


@dataclass(frozen=True, eq=False)
class DeltaJoin(Operator):
    """Inner join as a delta query: Σᵢ ΔRᵢ ⋈ earlier inputs (new) ⋈ later inputs (old)."""

    kind = "join"

    @property
    def join(self) -> Join:
        """The join's plan node."""
        assert isinstance(self.node, Join)
        return self.node

    def input_keys(self) -> tuple[tuple[str, ...] | None, ...]:
        if len(self.inputs) != 2:
            return tuple(() for _ in self.inputs)
        left = set(self.join.relations[0].schema.names)
        pairs = [(a, b) if a in left else (b, a) for a, b in self.join.equi_keys()]
        return tuple(a for a, _ in pairs), tuple(b for _, b in pairs)

    def reads_integrals(self) -> tuple[bool, ...]:
        return tuple(True for _ in self.inputs)

    def change(self, run: Run) -> str | None:
        deltas = [run.change(i) for i in self.inputs]
        if all(d is None for d in deltas):
            return None
        olds = self._integrals(run)
        schemas = [i.schema for i in self.inputs]
        deltas = self._shared(run, deltas)
        terms = []
        for i, delta in enumerate(deltas):
            if delta is None:
                continue
            sources = []
            for j, old in enumerate(olds):
                if j != i:
                    old = self._old_at_keys(run, j, i, delta) or old
                if j < i and deltas[j] is not None:
                    sources.append(union_all_sql([old, deltas[j]]))  # type: ignore[list-item]
                elif j == i:
                    sources.append(delta)
                else:
                    sources.append(old)
            order = self._from_order(i)
            term = join_sql([sources[k] for k in order], [schemas[k] for k in order],
                            self.join.condition, weighted=True)
            if order != sorted(order):  # the columns back in the join's order
                term = f"SELECT {column_list(self.schema.names)}, {W} FROM ({term}) AS __j"
            terms.append(term)
        return terms[0] if len(terms) == 1 else union_all_sql(terms)

    @cached_property
    def _links(self) -> dict[int, set[int]]:
        """Per input, the inputs a conjunct of the condition relates it to (one reading
        columns of exactly two inputs)."""
        owner = {c: k for k, r in enumerate(self.inputs) for c in r.schema.names}
        links: dict[int, set[int]] = {k: set() for k in range(len(self.inputs))}
        for conjunct in conjuncts(self.join.condition):
            read = {owner[c.name] for c in conjunct.find_all(exp.Column) if c.name in owner}
            if len(read) == 2:
                a, b = read
                links[a].add(b)
                links[b].add(a)
        return links

    def _from_order(self, changed: int) -> list[int]:
        """The order a term lists its inputs in: the join's own when each input is linked
        to one before it; else from the ``changed`` input on, each next the first one linked
        to those listed (unlinked ones last). DuckDB plans a FROM list that starts with
        two unlinked inputs, one of them read at keys, as their cross product (TPC-DS q64:
        two ``date_dim`` copies, 107M rows, where ``customer`` links them)."""
        count = len(self.inputs)
        if all(self._links[k] & set(range(k)) for k in range(1, count)):
            return list(range(count))
        order = [changed]
        while len(order) < count:
            rest = [k for k in range(count) if k not in order]
            order.append(next((k for k in rest if self._links[k] & set(order)), rest[0]))
        return order

    def _shared(self, run: Run, deltas: list[str | None]) -> list[str | None]:
        """The changes, each one of a fused join (a join without state below, maybe under
        filters and projections) computed once into a table. The delta query reads a
        change several times (its own term, the keys its other inputs are read at, the
        later terms' new versions): a chain of joins, each reading the change below it
        twice, would otherwise grow as 2ⁿ. (A common table expression would do for the
        text, but the keys an input is read at must be a query of their own.)"""
        shared: list[str | None] = list(deltas)
        for i, delta in enumerate(deltas):
            if delta is not None and self._joined_inputs[i]:
                # Consolidated: a join's change over inputs that all changed holds rows
                # that cancel, and the next level up multiplies them (select5: 22,401
                # rows of one that sum to one row, joined with 8,764 that sum to ten).
                names = self.inputs[i].schema.names
                shared[i] = run.materialize(self, f"delta{i}", consolidate_sql(delta, names))
        return shared

    @cached_property
    def _joined_inputs(self) -> tuple[bool, ...]:
        """Per input: whether its change is a fused join's (see ``fused_join``)."""
        return tuple(fused_join(i) for i in self.inputs)

    def _old_at_keys(self, run: Run, j: int, i: int, delta: str) -> str | None:
        """Input ``j``'s integral at the keys of input ``i``'s change, when ``=`` of the
        condition link the two and input ``j`` can read its integral that way: at every
        linked column at once (partsupp at (ps_partkey, ps_suppkey), not at ps_suppkey
        alone, which holds eighty times the rows), else at one of them."""
        mine, theirs = self.inputs[j].schema.names, self.inputs[i].schema.names
        pairs: dict[str, str] = {}
        for conjunct in conjuncts(self.join.condition):
            if not isinstance(conjunct, exp.EQ):
                continue
            sides = (conjunct.left, conjunct.right)
            if not all(isinstance(side, exp.Column) for side in sides):
                continue
            for a, b in (sides, sides[::-1]):
                if a.name in mine and b.name in theirs:
                    pairs.setdefault(a.name, b.name)
                    break
        tries = [list(pairs.items())] if len(pairs) > 1 else []
        for pair in [*tries, *([p] for p in pairs.items())]:
            keys = f"SELECT {column_list([b for _, b in pair])} FROM ({delta}) AS __d"
            at = At(tuple(a for a, _ in pair), keys, False)
            restricted = self.inputs[j].integral_at(run, at)
            if restricted is not None:
                return restricted
        return None

    def integral(self, run: Run) -> str:
        olds = self._integrals(run)
        return join_sql(olds, [i.schema for i in self.inputs], self.join.condition, True)

    def integral_at(self, run: Run, at: At) -> str | None:
        """The join's integral at ``at``'s keys, when one input holds all of ``at``'s
        columns and can be read at them: that input at the keys, then each input linked
        to one already read, at the keys of what was read (a lookup chain along the
        condition's equalities; an input no equality reaches is read whole). A join
        above this one (a wide join's tree, ``ivm.passes.wide_joins``) then reads this
        side at its change's keys instead of joining every input's whole integral: a
        select5 epoch spent 8.6 s on one such join of 30 ten-row tables."""
        owner = next((k for k, i in enumerate(self.inputs)
                      if set(at.columns) <= set(i.schema.names)), None)
        if owner is None:
            return None
        first = self.inputs[owner].integral_at(run, At(at.columns, at.keys, at.nulls))
        if first is None:
            return None
        read = {owner: self._once(run, owner, first)}
        while len(read) < len(self.inputs):
            hop = next(((j, v) for j in range(len(self.inputs)) if j not in read
                        for v in sorted(self._links[j] & set(read))), None)
            if hop is None:
                break
            j, v = hop
            rows = self._old_at_keys(run, j, v, read[v])
            read[j] = self._once(run, j, rows) if rows is not None else self._whole(run, j)
        olds = [read[k] if k in read else self._whole(run, k) for k in range(len(self.inputs))]
        return join_sql(olds, [i.schema for i in self.inputs], self.join.condition, True)

    def _whole(self, run: Run, k: int) -> str:
        """Input ``k``'s whole integral, a join's consolidated. A trace holds a deleted row
        as rows that cancel (+1, -1) until it is compacted, and a join of traces
        multiplies them: a row joined across n inputs that each hold such a pair is 2ⁿ
        rows. Joins of joins (a wide join's tree, ``ivm.passes.wide_joins``; binary
        joins) consolidate at each level, so the rows stay as many as the live ones
        (select5's join of 57 ten-row tables read 1.4M rows for one)."""
        integral = run.integral(self.inputs[k])
        if isinstance(self.inputs[k], DeltaJoin):
            return consolidate_sql(integral, self.inputs[k].schema.names)
        return integral

    def _once(self, run: Run, k: int, rows: str) -> str:
        """Rows of input ``k`` read at keys; a join's consolidated and run once into a
        table, since the next inputs are read at their keys (its text would otherwise be
        repeated at every hop)."""
        if not self._joined_inputs[k]:
            return rows
        names = self.inputs[k].schema.names
        return run.materialize(self, f"at{k}", consolidate_sql(rows, names))

    def _integrals(self, run: Run) -> list[str]:
        """Every input's whole integral (see ``_whole``)."""
        return [self._whole(run, k) for k in range(len(self.inputs))]

    def label(self) -> str:
        on = sql_of(self.join.condition) if self.join.condition is not None else "true"
        keys = ", ".join(f"{a} = {b}" for a, b in self.join.equi_keys()) or "none (nested loop)"
        return (
            f"DeltaJoin of {len(self.inputs)} inputs on {on}; equi-keys: {keys} "
            "(state: the inputs' integrals)"
        )
