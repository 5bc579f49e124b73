"""An inner join read as a tree of its inputs, for ``ivm.passes.factorize``.

A join's condition (with a filter right above it) is read as edges (equalities of a
column of one input with a column of another) and local predicates (reading one
input); anything else, or edges that do not make a tree over the inputs, and the join
is no tree. A tree is rooted where the partial aggregates below its root carry the
fewest group keys and, among those roots, where it is shortest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sqlglot import exp

from ivm.operators.filter import Filter
from ivm.operators.project import Project
from ivm.operators.scan import Scan
from ivm.plan.node import Plan


@dataclass
class JoinTree:
    """The inputs of a join, its edges and local predicates, and (once ``rooted``) its
    root, each input's parent and children, and the inputs in breadth-first order."""

    relations: tuple[Plan, ...]
    owner: dict[str, int]
    """The input each column name belongs to."""
    edges: dict[frozenset[int], list[exp.Expression]] = field(default_factory=dict)
    local: dict[int, list[exp.Expression]] = field(default_factory=dict)
    root: int = 0
    parent: dict[int, int] = field(default_factory=dict)
    children: dict[int, list[int]] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)

    @classmethod
    def of(cls, relations: tuple[Plan, ...], terms: Sequence[exp.Expression]) -> JoinTree | None:
        """The join of ``relations`` on the conjunction ``terms``, or None if any term is
        neither an edge nor a local predicate."""
        tree = cls(relations, {c: i for i, r in enumerate(relations) for c in r.schema.names})
        for term in terms:
            tables = tree.tables_of(term)
            if not tables:
                return None
            if len(tables) == 1:
                tree.local.setdefault(next(iter(tables)), []).append(term)
                continue
            if not (isinstance(term, exp.EQ) and len(tables) == 2
                    and all(isinstance(s, exp.Column) for s in (term.left, term.right))):
                return None
            tree.edges.setdefault(frozenset(tables), []).append(term)
        return tree

    def tables_of(self, expression: exp.Expression) -> set[int] | None:
        """The inputs whose columns ``expression`` reads (None: a column of none, or an
        aggregate, window, subquery or star in it)."""
        tables = set()
        for column in expression.find_all(exp.Column):
            if column.name not in self.owner:
                return None
            tables.add(self.owner[column.name])
        if any(expression.find_all(exp.AggFunc, exp.Window, exp.Subquery, exp.Star)):
            return None
        return tables

    def rooted(self, key_tables: Sequence[int]) -> bool:
        """Whether the edges make a tree over the inputs; if so, root it where the
        subtrees below the root hold the fewest of ``key_tables`` (the input of each
        group key), then where it is shortest (the fewest levels a change climbs)."""
        count = len(self.relations)
        if len(self.edges) != count - 1:
            return False
        neighbours: dict[int, set[int]] = {i: set() for i in range(count)}
        for pair in self.edges:
            a, b = sorted(pair)
            neighbours[a].add(b)
            neighbours[b].add(a)
        best = None
        for root in range(count):
            parent, depth, order = {}, {root: 0}, [root]
            for table in order:
                for other in sorted(neighbours[table]):
                    if other not in depth:
                        parent[other], depth[other] = table, depth[table] + 1
                        order.append(other)
            if len(order) != count:
                return False
            carried = 0
            for table in parent:
                for probe in key_tables:
                    while probe in parent and probe != table:
                        probe = parent[probe]
                    carried += probe == table
            score = (carried, max(depth.values()), root)
            if best is None or score < best[0]:
                best = (score, root, parent, order)
        assert best is not None
        _, self.root, self.parent, self.order = best
        self.children = {i: [] for i in range(count)}
        for table in self.order[1:]:
            self.children[self.parent[table]].append(table)
        return True

    def subtree(self, table: int) -> list[int]:
        """``table`` and every input below it."""
        found = [table]
        for child in self.children[table]:
            found += self.subtree(child)
        return found

    def up_columns(self, table: int) -> list[str]:
        """``table``'s columns in its edge to its parent."""
        terms = self.edges[frozenset((table, self.parent[table]))]
        return [c.name for t in terms for c in (t.left, t.right) if self.owner[c.name] == table]

    def fans_out(self, primary_keys: Mapping[str, tuple[str, ...]]) -> bool:
        """Whether some edge has neither side on a base table's primary key."""
        return any(not any(self._keyed(t, terms, primary_keys) for t in pair)
                   for pair, terms in self.edges.items())

    def _keyed(self, table: int, terms: list[exp.Expression],
               primary_keys: Mapping[str, tuple[str, ...]]) -> bool:
        """Whether ``table``'s side of an edge is a base table's primary key (seen through
        the filters and renaming projections the planner put above its scan)."""
        names = {c.name for t in terms for c in (t.left, t.right) if self.owner[c.name] == table}
        node = self.relations[table]
        while True:
            if isinstance(node, Filter):
                node = node.input
            elif isinstance(node, Project):
                renamed = {n: e for n, e in node.exprs if n in names}
                if len(renamed) != len(names) or not all(
                        isinstance(e, exp.Column) for e in renamed.values()):
                    return False
                names = {e.name for e in renamed.values()}
                node = node.input
            else:
                break
        key = primary_keys.get(node.name, ()) if isinstance(node, Scan) else ()
        return bool(key) and set(key) <= names
