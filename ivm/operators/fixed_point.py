"""The fixed point: WITH RECURSIVE maintained as a nested circuit over (epoch, iteration).

Meaning: a ``Recursive`` plan node (``ivm.operators.recursive``), each row of the
result with its multiplicity (UNION: once).

State, indexed by iteration j (the working table Wⱼ tagged ``__ivm_iter`` = j):

* ``UNION ALL``: trace ``working``, ⊎ⱼ Wⱼ × {j}.
* ``UNION``: trace ``derivations``, ⊎ⱼ Nⱼ × {j} (N₀ = anchor, Nⱼ₊₁ = step(Wⱼ): how many
  ways iteration j derives each row), and trace ``births``, each result row once with
  the first iteration deriving it (so Wⱼ = the rows born at j).
* the traces of the step circuit's own operators (a DISTINCT or GROUP BY in the step).

The step runs as a *child circuit* (``child``): ``ivm.circuit.iterations`` tags it so
that it computes step(Wⱼ) for every j at once from the tagged working tables, and
the ordinary incremental operators maintain it. An epoch then runs in *product
order* over (epoch, iteration): first the imports' changes against the old working
tables (their effect at every iteration at once: ΔN from W_old ⋈ Δimport), then
iterations j = 0, 1, … in order, each one a step of the child circuit fed with
ΔWⱼ, its output ΔNⱼ₊₁. Iterations with nothing pending are skipped, so an epoch's
work follows the change: an edge joining nothing derives nothing.

UNION: ΔWⱼ follows from the births rule. Row x is in Wⱼ iff Nⱼ(x) > 0 and no
earlier iteration derives x. At iteration j the rows to look at are those whose
Nⱼ changed and those whose birth already moved this epoch (born earlier now, or
no longer born before j): for each, the new and old membership of Wⱼ give ΔWⱼ(x)
∈ {−1, 0, +1}. A deleted edge thus retracts exactly the rows that lose every
derivation, cycles included: a row derived only through itself is never re-born,
because iteration j only sees derivations from iterations before it.

The loop stops when no iteration has anything pending; past ``Run.iteration_limit``
it raises ``IterationLimitError`` (the epoch is rolled back).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

from ivm.operators.base import Operator, Run, TraceSpec
from ivm.operators.invariant_columns import invariant_positions
from ivm.operators.iterations_loop import (
    BIRTHS,
    DERIVATIONS,
    WORKING,
    UnionAllLoop,
    UnionLoop,
    next_iteration,
)
from ivm.operators.nested_run import NestedRun, nested_role
from ivm.operators.recursive import ITER, Recursive, tagged_schema
from ivm.plan.sql import W, column_list, union_all_sql


class StepCircuit(Protocol):
    """What a fixed point needs of its child circuit (an ``ivm.circuit.Circuit``)."""

    @property
    def output(self) -> Operator:
        """The operator whose change is the step's output."""
        ...

    def traces(self) -> Iterator[tuple[Operator, TraceSpec]]:
        """Every trace the child's operators keep, with its owner."""
        ...

    def explain(self) -> str:
        """The child as an indented tree."""
        ...


@dataclass(frozen=True, eq=False)
class FixedPoint(Operator):
    """WITH RECURSIVE: iterations maintained in product order (see the module docstring).

    Inputs: the anchor, then the step's imports; ``child`` is the tagged step's circuit.
    """

    child: StepCircuit | None = field(default=None)
    kind = "fixed_point"

    @property
    def recursive(self) -> Recursive:
        """The plan node."""
        assert isinstance(self.node, Recursive)
        return self.node

    @property
    def step_circuit(self) -> StepCircuit:
        """The child circuit (the tagged step)."""
        assert self.child is not None
        return self.child

    # -- declarations ------------------------------------------------------------------------

    def traces(self) -> tuple[TraceSpec, ...]:
        names = tuple(self.schema.names)
        schema = tagged_schema(self.schema)
        own = (
            (TraceSpec(WORKING, schema, (ITER, *names)),)
            if self.recursive.union_all
            else (
                TraceSpec(DERIVATIONS, schema, (ITER, *names)),
                TraceSpec(BIRTHS, schema, names),
            )
        )
        nested = tuple(
            TraceSpec(nested_role(op, spec.role), spec.schema, spec.key)
            for op, spec in self.step_circuit.traces()
        )
        return own + nested

    @cached_property
    def invariant(self) -> int | None:
        """The position of a column the step never changes (``ivm.operators.invariant_columns``):
        partitioned by it, the iterations run apart in each partition; None if there is none."""
        positions = invariant_positions(self.recursive)
        return positions[0] if positions else None

    def input_keys(self) -> tuple[tuple[str, ...] | None, ...]:
        if self.invariant is None:
            return tuple(() for _ in self.inputs)  # the iterations run in one place
        anchor = self.inputs[0].schema.names[self.invariant]
        return ((anchor,), *(() for _ in self.inputs[1:]))

    def replicated_inputs(self) -> tuple[bool, ...]:
        """Partitioned by an invariant column, every partition reads all of the imports."""
        return (False, *(self.invariant is not None for _ in self.inputs[1:]))

    def output_key(self) -> tuple[str, ...] | None:
        return None if self.invariant is None else (self.schema.names[self.invariant],)

    def reads_integrals(self) -> tuple[bool, ...]:
        return (False, *(True for _ in self.inputs[1:]))

    def label(self) -> str:
        node = self.recursive
        if node.union_all:
            rule = "UNION ALL: Wⱼ₊₁ = step(Wⱼ); state: every Wⱼ by iteration"
        else:
            rule = (
                "UNION: a row is in Wⱼ where iteration j first derives it; state: "
                "derivation counts and first iterations"
            )
        return f"FixedPoint {node.name} ({rule})"

    def nested_lines(self) -> list[str]:
        """The child circuit for ``explain``, with its feedback edge."""
        name = self.recursive.name
        lines = [
            f"child circuit of {name}, over (epoch, iteration); "
            f"feedback: the change of W{name}ⱼ → Feedback {name}, output → Nⱼ₊₁"
        ]
        lines += self.step_circuit.explain().splitlines()[1:]
        return lines

    # -- computation -------------------------------------------------------------------------

    def integral(self, run: Run) -> str:
        rows = run.read(self, WORKING if self.recursive.union_all else BIRTHS)
        return f"SELECT {column_list(self.schema.names)}, {W} FROM ({rows}) AS __r"

    def change(self, run: Run) -> str | None:
        anchor = run.change(self.inputs[0])
        imports = [run.change(i) for i in self.inputs[1:]]
        if anchor is None and all(i is None for i in imports):
            return None
        names = self.schema.names
        old = run.read(self, WORKING if self.recursive.union_all else BIRTHS)
        nested = NestedRun(run, self, old)
        seeds = []
        if anchor is not None:
            seeds.append(f"SELECT {column_list(names)}, 0::BIGINT AS {ITER}, {W} FROM ({anchor})")
        if any(i is not None for i in imports):
            derived = nested.step(None)
            if derived is not None:
                seeds.append(next_iteration(derived, names))
        if not seeds:
            return None
        pending = run.materialize(self, DERIVATIONS, union_all_sql(seeds))
        if run.is_empty(pending):
            return None
        loop = (UnionAllLoop if self.recursive.union_all else UnionLoop)(self, run, nested, pending)
        changes = loop.iterate()
        nested.finish()
        if changes is None:
            return None
        return f"SELECT {column_list(names)}, {W} FROM ({changes})"
