"""Incremental circuits: what runs each epoch, and the state each operator keeps.

``ivm.incrementalize`` builds circuits from logical plans.

Every stateful operator declares ``state_key``: the columns its state is
partitioned by (what a distributed executor hashes on). An empty key means
the state is one piece (a global aggregate).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ivm.operators.aggregate import AggregateShape
from ivm.plan.nodes import Filter, Join, Plan, Project
from ivm.plan.sql import sql_of


@dataclass(frozen=True, eq=False)
class Operator:
    """One operator of a circuit; ``index`` is its position in the circuit."""

    index: int
    node: Plan
    inputs: tuple[Operator, ...]

    @property
    def stateful(self) -> bool:
        """True when the operator keeps a trace of its own."""
        return False

    @property
    def state_key(self) -> tuple[str, ...] | None:
        """Columns the operator's state is partitioned by; None when it keeps none."""
        return None

    def label(self) -> str:
        """One line for ``explain``."""
        return type(self).__name__


@dataclass(frozen=True, eq=False)
class Source(Operator):
    """The change of a base table or of another view; its integral is that relation's trace."""

    name: str

    def label(self) -> str:
        return f"Source {self.name} (integral: the relation's trace)"


@dataclass(frozen=True, eq=False)
class Linear(Operator):
    """Filter, Project or UNION ALL applied to the change as it is (no state)."""

    def label(self) -> str:
        node = self.node
        if isinstance(node, Filter):
            return f"Filter {sql_of(node.predicate)}"
        if isinstance(node, Project):
            return "Project " + ", ".join(
                n if sql_of(e) == f'"{n}"' else f"{n} := {sql_of(e)}" for n, e in node.exprs
            )
        return "UnionAll"


@dataclass(frozen=True, eq=False)
class DeltaJoin(Operator):
    """Inner join as a delta query: Σᵢ ΔRᵢ ⋈ earlier inputs (new) ⋈ later inputs (old)."""

    def equi_keys(self) -> list[tuple[str, str]]:
        """Column pairs the condition equates across two different inputs.

        These are the keys a partitioned executor arranges each input by.
        """
        node = self.node
        assert isinstance(node, Join)
        if node.condition is None:
            return []
        owner = {c: i for i, r in enumerate(node.relations) for c in r.schema.names}
        pairs = []
        for conjunct in (
            node.condition.flatten() if isinstance(node.condition, exp.And) else [node.condition]
        ):
            if isinstance(conjunct, exp.EQ) and all(
                isinstance(side, exp.Column) for side in (conjunct.left, conjunct.right)
            ):
                left, right = conjunct.left.name, conjunct.right.name
                if left in owner and right in owner and owner[left] != owner[right]:
                    pairs.append((left, right))
        return pairs

    def label(self) -> str:
        node = self.node
        assert isinstance(node, Join)
        on = sql_of(node.condition) if node.condition is not None else "true"
        keys = ", ".join(f"{a} = {b}" for a, b in self.equi_keys()) or "none (nested loop)"
        return (
            f"DeltaJoin of {len(self.inputs)} inputs on {on}; equi-keys: {keys} "
            "(state: the inputs' integrals)"
        )


@dataclass(frozen=True, eq=False)
class IncrementalAggregate(Operator):
    """GROUP BY with a trace of group versions; MIN/MAX recomputed per touched key."""

    shape: AggregateShape

    @property
    def stateful(self) -> bool:
        return True

    @property
    def state_key(self) -> tuple[str, ...]:
        return self.shape.keys

    def label(self) -> str:
        calls = ", ".join(f"{c.name} := {c.func}({c.arg or '*'})" for c in self.shape.calls)
        keys = ", ".join(self.shape.keys) or "(global)"
        recomputed = ", ".join(c.name for c in self.shape.recomputed)
        how = f"; recomputed per touched key: {recomputed}" if recomputed else ""
        return f"IncrementalAggregate by [{keys}] {calls} (state: group versions by key{how})"


@dataclass(frozen=True, eq=False)
class IncrementalDistinct(Operator):
    """DISTINCT: a trace of its input; output only where a row's weight crosses zero."""

    @property
    def stateful(self) -> bool:
        return True

    @property
    def state_key(self) -> tuple[str, ...]:
        return tuple(self.node.schema.names)

    def label(self) -> str:
        return "IncrementalDistinct (state: input trace by whole row)"


@dataclass(frozen=True)
class Circuit:
    """The incremental circuit of one view: operators in dependency order, output last."""

    view: str
    operators: tuple[Operator, ...]

    @property
    def output(self) -> Operator:
        """The operator whose change is the view's change."""
        return self.operators[-1]

    def sources(self) -> list[str]:
        """Names of the tables and views the circuit reads."""
        return [op.name for op in self.operators if isinstance(op, Source)]

    def explain(self) -> str:
        """The circuit as an indented tree, output at the top."""
        lines = [f"view {self.view}: output change consolidated into the view's trace"]

        def show(op: Operator, depth: int) -> None:
            names = ", ".join(op.node.schema.names)
            lines.append(f"{'  ' * depth}#{op.index} {op.label()}  -> [{names}]")
            for child in op.inputs:
                show(child, depth + 1)

        show(self.output, 1)
        return "\n".join(lines)

