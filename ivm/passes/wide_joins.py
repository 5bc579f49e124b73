"""Pass: a wide inner join becomes a balanced tree of joins (embedded mode).

An n-way ``DeltaJoin`` computes its change as Σᵢ ΔRᵢ ⋈ R₁..ᵢ₋₁(new) ⋈ Rᵢ₊₁..ₙ(old): one
term of n inputs per changed input. An epoch that changes many of a wide join's inputs
(SQLite's select5 joins up to 64 tables, and its epochs insert into all of them) runs k
terms of n inputs, and DuckDB's planning of each grows faster than n: 64 inputs, 32 of
them changed, took 19 s of CPU for ten-row tables.

Split instead into two joins A ⋈ B whose change is ΔA ⋈ B(old) ⊎ A(new) ⋈ ΔB, each side
split again: every level's change is computed once (``DeltaJoin._shared`` materializes
a joined change), so an epoch's SQL holds O(n log n) input references instead of O(k·n),
and no query joins more than about half the inputs. Parts of at most ``LEAF`` inputs stay
delta queries. No state is added: each side's
integral is read as the join of its inputs' integrals, as before, consolidated at each
level (``DeltaJoin._whole``: a trace's cancelling rows would multiply up the tree).

The split follows the equalities of the condition: both sides must stay connected (a
side that is a cross product would have a huge change), so inputs that no equality links
are joined as parts of their own (the cross product the query asks for), and a
connected part is cut at the edge of a spanning tree that cuts it most evenly; a part is
left as one join when even the best cut leaves fewer than a quarter of its inputs on one
side (a star: one fact table, many dimensions). Each conjunct is evaluated at the lowest
join that has its columns; a projection restores the column order.

Partitioned execution splits every join into binary joins already (``binary_joins``).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from ivm.circuit.circuit import Circuit
from ivm.operators.base import Operator
from ivm.operators.filter import Filter
from ivm.operators.join import DeltaJoin, Join, conjuncts
from ivm.operators.project import Project, ProjectOperator
from ivm.passes.binary_joins import merge_filter
from ivm.schema import Schema

WIDE = 12
"""Joins of more inputs than this are split (narrower ones plan fast as they are)."""

LEAF = 3
"""Parts of at most this many inputs are not split further (each level of the tree is a
statement of its own per epoch, its change materialized: measured, 3 costs the least)."""


def wide_joins(circuit: Circuit, partitioned: bool = False) -> Circuit:
    """``circuit`` with every inner join of more than ``WIDE`` inputs as a balanced tree
    of joins (embedded mode only)."""
    if partitioned:
        return circuit
    return circuit.rewrite(_balanced)


def _balanced(op: Operator) -> Operator:
    if isinstance(op.node, Filter) and _wide(op.inputs[0]):
        op = merge_filter(op)
    if not _wide(op):
        return op
    assert isinstance(op, DeltaJoin)
    owner = {c: i for i, r in enumerate(op.inputs) for c in r.schema.names}
    tree = _Tree(op.inputs, conjuncts(op.join.condition), owner)
    joined = tree.build(list(range(len(op.inputs))), list(range(len(tree.pending))))
    if joined.schema.names == op.schema.names:
        return joined
    exprs = tuple(
        (name, exp.Column(this=exp.Identifier(this=name, quoted=True)))
        for name in op.schema.names
    )
    project = Project(schema=op.schema, input=joined.node, exprs=exprs)
    return ProjectOperator(project, (joined,))


def _wide(op: Operator) -> bool:
    return isinstance(op, DeltaJoin) and len(op.inputs) > WIDE


class _Tree:
    """Builds the join tree of one wide join."""

    def __init__(self, inputs: Sequence[Operator], terms: list[exp.Expression],
                 owner: dict[str, int]) -> None:
        self.inputs = inputs
        self.pending = terms
        self.reads = [{owner[c.name] for c in t.find_all(exp.Column) if c.name in owner}
                      for t in terms]
        self.edges: dict[int, set[int]] = {i: set() for i in range(len(inputs))}
        for term in terms:
            if isinstance(term, (exp.EQ, exp.NullSafeEQ)) and all(
                isinstance(s, exp.Column) and s.name in owner for s in (term.left, term.right)
            ):
                a, b = owner[term.left.name], owner[term.right.name]
                if a != b:
                    self.edges[a].add(b)
                    self.edges[b].add(a)

    def build(self, members: list[int], terms: list[int]) -> Operator:
        """The join of the inputs ``members`` on the ``terms`` (indices into
        ``pending``) that read only them."""
        parts = self._components(members)
        if len(parts) == 1:
            parts = self._split(members) or [[m] for m in members]
        if len(parts) == len(members):
            return self._join([self.inputs[i] for i in members], terms)
        inside = [[t for t in terms if len(p) > 1 and self.reads[t] <= set(p)] for p in parts]
        placed = {t for ts in inside for t in ts}
        here = [t for t in terms if t not in placed]
        return self._join([self.build(p, ts) for p, ts in zip(parts, inside, strict=True)],
                          here)

    def _components(self, members: list[int]) -> list[list[int]]:
        """``members`` in parts connected by equalities (a cross product joins them)."""
        inside, seen, parts = set(members), set(), []
        for start in members:
            if start in seen:
                continue
            seen.add(start)
            part = [start]
            for node in part:
                for other in sorted(self.edges[node] & inside - seen):
                    seen.add(other)
                    part.append(other)
            parts.append(sorted(part, key=members.index))
        return parts

    def _split(self, members: list[int]) -> list[list[int]] | None:
        """Two connected parts of connected ``members``, as even as a spanning tree's edge
        cuts them; None when that is too uneven."""
        if len(members) <= LEAF:
            return None
        inside = set(members)
        parent: dict[int, int | None] = {members[0]: None}
        order = [members[0]]
        for node in order:  # breadth first: ``order`` grows while it is read
            for other in sorted(self.edges[node] & inside):
                if other not in parent:
                    parent[other] = node
                    order.append(other)
        size = dict.fromkeys(order, 1)
        for node in reversed(order[1:]):
            size[parent[node]] += size[node]  # type: ignore[index]
        best = min(order[1:], key=lambda node: abs(len(members) - 2 * size[node]))
        if min(size[best], len(members) - size[best]) < max(2, len(members) // 4):
            return None
        below = {best}
        for node in order:
            if parent.get(node) in below:
                below.add(node)
        return [[m for m in members if m not in below], [m for m in members if m in below]]

    def _join(self, inputs: list[Operator], indices: list[int]) -> Operator:
        if len(inputs) == 1 and not indices:
            return inputs[0]
        terms = [self.pending[t] for t in indices]
        schema = Schema(tuple(c for i in inputs for c in i.schema.columns))
        condition = (exp.and_(*terms) if len(terms) > 1 else terms[0]) if terms else None
        node = Join(schema=schema, relations=tuple(i.node for i in inputs), condition=condition)
        return DeltaJoin(node, tuple(inputs))
