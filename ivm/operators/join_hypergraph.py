"""The equi-join hypergraph of an n-way join, and the plan of its worst-case-optimal form.

An *attribute* is a class of columns that the join's ``=`` conjuncts make equal
(``e1.dst = e2.src`` puts both in one class; equalities chain). Each input covers
the attributes of its columns: a hyperedge. The join is *cyclic* when the
GYO reduction (drop an attribute only one hyperedge holds; drop a hyperedge
another contains) does not empty the hypergraph: triangles, 4-cycles, k-cliques.
Acyclic joins are best served by binary or delta-query plans; cyclic ones by a
generic join (``ivm.operators.generic_join``) extending tuples attribute by attribute.

``JoinShape.of`` reads a join's condition into attributes plus a *residual* (every
conjunct that is not an ``=`` between two inputs' columns: filters applied to the
joined rows). ``Rule`` plans one delta rule: the changed input binds its attributes,
then each further attribute is an ``Extension``: the inputs holding it and some bound
attribute count their extensions per prefix, the one with fewest proposes them, the
others validate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp


@dataclass(frozen=True)
class Extension:
    """One step of a delta rule: bind attribute ``attribute`` for every prefix.

    ``participants``: per input taking part, its index and the bound attributes it is
    looked up by (its *prefix key*). With one participant it proposes alone."""

    attribute: int
    participants: tuple[tuple[int, tuple[int, ...]], ...]


@dataclass(frozen=True)
class Rule:
    """The delta rule of input ``changed``: its change binds ``bound`` (its own
    attributes); the ``steps`` bind the rest in order. Inputs before it are read at
    their new version (the epoch's change included), inputs after it at their old."""

    changed: int
    bound: tuple[int, ...]
    steps: tuple[Extension, ...]

    @property
    def order(self) -> tuple[int, ...]:
        """The attribute order of this rule."""
        return self.bound + tuple(s.attribute for s in self.steps)


@dataclass(frozen=True)
class JoinShape:
    """A join condition as attributes (classes of equal columns) and a residual."""

    attributes: tuple[tuple[tuple[int, str], ...], ...]
    """Per attribute, the (input index, column) pairs it equates, in input order."""
    residual: tuple[exp.Expression, ...]
    inputs: int

    @classmethod
    def of(
        cls, schemas: Sequence[Sequence[str]], conjuncts: Sequence[exp.Expression]
    ) -> JoinShape | None:
        """The shape of a join of inputs with columns ``schemas`` on ``conjuncts``; None
        when one input would have two columns in one attribute (an equality inside an
        input, maybe through others: not a hypergraph this plan serves)."""
        owner = {c: i for i, names in enumerate(schemas) for c in names}
        parent: dict[str, str] = {}

        def find(c: str) -> str:
            while parent.get(c, c) != c:
                c = parent[c]
            return c

        residual = []
        for conjunct in conjuncts:
            sides = (conjunct.left, conjunct.right) if isinstance(conjunct, exp.EQ) else ()
            names = [s.name for s in sides if isinstance(s, exp.Column) and not s.table]
            if len(names) == 2 and all(n in owner for n in names) and (
                owner[names[0]] != owner[names[1]]
            ):
                parent.setdefault(names[0], names[0])
                parent.setdefault(names[1], names[1])
                parent[find(names[0])] = find(names[1])
            else:
                residual.append(conjunct)
        classes: dict[str, list[tuple[int, str]]] = {}
        for column in sorted(parent, key=lambda c: (owner[c], schemas[owner[c]].index(c))):
            classes.setdefault(find(column), []).append((owner[column], column))
        attributes = tuple(tuple(members) for members in classes.values())
        for members in attributes:
            if len({i for i, _ in members}) != len(members):
                return None
        return cls(attributes, tuple(residual), len(schemas))

    def columns_of(self, i: int) -> dict[int, str]:
        """Input ``i``'s attributes: attribute index → its column there."""
        return {a: c for a, members in enumerate(self.attributes) for j, c in members if j == i}

    def edges(self) -> list[frozenset[int]]:
        """Each input's attributes (its hyperedge)."""
        return [frozenset(self.columns_of(i)) for i in range(self.inputs)]

    def connected(self) -> bool:
        """True when every input is linked to every other through attributes."""
        edges = self.edges()
        reached, frontier = {0}, [0]
        while frontier:
            i = frontier.pop()
            for j, edge in enumerate(edges):
                if j not in reached and edge & edges[i]:
                    reached.add(j)
                    frontier.append(j)
        return len(reached) == self.inputs

    def cyclic(self) -> bool:
        """True when the GYO reduction leaves something: the hypergraph is cyclic."""
        return bool(self.core())

    def core(self) -> frozenset[int]:
        """The inputs the GYO reduction leaves (drop an attribute only one hyperedge holds,
        a hyperedge another contains, an empty one): none when the join is acyclic."""
        edges = {i: set(e) for i, e in enumerate(self.edges())}
        changed = True
        while changed and edges:
            changed = False
            for edge in edges.values():
                lonely = {a for a in edge if sum(a in other for other in edges.values()) == 1}
                if lonely:
                    edge -= lonely
                    changed = True
            for i, edge in list(edges.items()):
                if not edge or any(edge <= other for m, other in edges.items() if m != i):
                    del edges[i]
                    changed = True
                    break
        return frozenset(edges)

    def global_order(self) -> tuple[int, ...]:
        """An attribute order: the attribute most inputs hold first, then repeatedly the
        one most inputs share with what is bound (ties: the earlier attribute)."""
        edges = self.edges()
        order: list[int] = []
        left = list(range(len(self.attributes)))
        while left:
            def score(a: int) -> tuple[int, int]:
                holders = [e for e in edges if a in e]
                linked = sum(1 for e in holders if e & set(order))
                return linked, len(holders)

            best = max(left, key=lambda a: (score(a), -a))
            order.append(best)
            left.remove(best)
        return tuple(order)

    def rule(self, changed: int, order: Sequence[int]) -> Rule:
        """The delta rule of input ``changed`` following attribute ``order`` (its own
        attributes bound first; then the first attribute in order that some other input
        links to what is bound)."""
        edges = self.edges()
        bound = [a for a in order if a in edges[changed]]
        steps = []
        left = [a for a in order if a not in edges[changed]]
        while left:
            def participants(a: int) -> tuple[tuple[int, tuple[int, ...]], ...]:
                return tuple(
                    (j, tuple(b for b in bound if b in edges[j]))
                    for j in range(self.inputs)
                    if j != changed and a in edges[j] and edges[j] & set(bound)
                )

            attribute = next((a for a in left if participants(a)), left[0])
            steps.append(Extension(attribute, participants(attribute)))
            bound.append(attribute)
            left.remove(attribute)
        return Rule(changed, tuple(a for a in order if a in edges[changed]), tuple(steps))
