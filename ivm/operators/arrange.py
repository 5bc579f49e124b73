"""Arrange: the input unchanged, its integral kept in a trace of its own.

Meaning: (r, w) ↦ (r, w), the identity.

Why: operators without state of their own (filters, projections, UNION ALL, the
delta join) are fused into their consumer's SQL, their change and integral
written out as text each time they are read. A fused join read twice (an outer
join's result feeding another outer join, as its inner join and its anti join)
is then written out twice at every level above it, so the text of a chain of n
outer joins grows as 2ⁿ. An arrangement cuts that: its change is materialized
once per epoch and its integral is a table, whatever sits below it.

State: a trace of the input (rows and weights). Per epoch the consolidated input
change is materialized, appended to the trace, and is the output change. Placed
by the ``arrange_shared`` pass (embedded mode: a partitioned executor keeps a
stage's inputs in traces already).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ivm.operators.base import Operator, Run, TraceSpec
from ivm.plan.node import Plan
from ivm.plan.sql import consolidate_sql

INPUT = "input"


@dataclass(frozen=True, eq=False)
class Arrange(Plan):
    """``input`` as it is, kept in a trace."""

    input: Plan

    def plain(self, inputs: Sequence[str]) -> str:
        return inputs[0]

    def describe(self) -> str:
        return "Arrange"


@dataclass(frozen=True, eq=False)
class Arrangement(Operator):
    """The identity, with the input's integral kept in a trace."""

    kind = "arrange"

    def traces(self) -> tuple[TraceSpec, ...]:
        return (TraceSpec(INPUT, self.schema, ()),)

    def input_keys(self) -> tuple[tuple[str, ...] | None, ...]:
        return (tuple(self.schema.names),)

    def change(self, run: Run) -> str | None:
        delta = run.change(self.inputs[0])
        if delta is None:
            return None
        change = run.materialize(self, "change", consolidate_sql(delta, self.schema.names))
        run.append(self, INPUT, change)
        return change

    def integral(self, run: Run) -> str:
        return run.read(self, INPUT)

    def label(self) -> str:
        return "Arrangement (state: the input's integral, so what is below is read once)"
