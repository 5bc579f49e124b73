"""The ``Run`` a fixed point's child circuit computes against, and the child's leaves.

A fixed point (``ivm.operators.fixed_point``) runs its step circuit several times per
epoch: step 0 carries the imports' changes (the working tables unchanged), each later
step one iteration's ΔWⱼ (the imports at their new contents). ``NestedRun`` gives the
child's operators what they ask of an executor, per step: the leaves' changes and
integrals (``FeedbackSource``, ``ImportSource``), and traces that grow step by step:
what a step appends goes to a scratch accumulator at once (read with the trace by the
next steps) and to the trace itself when the epoch commits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ivm.operators.base import At, Operator, Run
from ivm.operators.reads import read_sql
from ivm.plan.sql import union_all_sql
from ivm.schema import Schema

if TYPE_CHECKING:
    from ivm.operators.fixed_point import FixedPoint

NESTED_ROLE_CHARS = 12
"""Hex digits of a step operator's fingerprint in the name of its trace."""


def nested_role(op: Operator, role: str) -> str:
    """The name, among its fixed point's traces, of trace ``role`` of step operator ``op``."""
    return f"{role}.{op.fingerprint[:NESTED_ROLE_CHARS]}"


class NestedRun:
    """The ``Run`` a fixed point's child circuit computes against, one step at a time
    (see the module docstring)."""

    backfill = False  # a child's leaves are its own; an import's change is the parent's

    def __init__(self, parent: Run, owner: FixedPoint, feedback_integral: str) -> None:
        self.parent = parent
        self.owner = owner
        self.feedback_integral = feedback_integral
        self.feedback_change: str | None = None
        self.first = True
        self._change: dict[str, str | None] = {}
        self._integral: dict[str, str] = {}
        self._pending: list[tuple[str, str]] = []
        self._accumulated: dict[str, str] = {}  # nested role → SQL reading its accumulator
        self._schemas = {spec.role: spec.schema for spec in owner.traces()}

    @property
    def epoch(self) -> int:
        return self.parent.epoch

    @property
    def iteration_limit(self) -> int:
        return self.parent.iteration_limit

    def step(self, feedback_change: str | None) -> str | None:
        """Run one step (the first: the imports' changes); SQL of the rows it derived
        (tagged with the iteration they were derived from), materialized."""
        self._change.clear()
        self._integral.clear()
        self._pending.clear()
        self.feedback_change = feedback_change
        output = self.change(self.owner.step_circuit.output)
        derived = None
        if output is not None:
            derived = self.parent.materialize(self.owner, "derived", output)
            if self.parent.is_empty(derived):
                derived = None
        for role, rows in self._pending:
            if role in self._accumulated:
                self.parent.extend(self.owner, f"acc.{role}", rows)
            else:
                self._accumulated[role] = self.parent.materialize(self.owner, f"acc.{role}", rows)
        self.first = False
        return derived

    def finish(self) -> None:
        """Append what the steps accumulated to the child's traces (at commit)."""
        for role, rows in self._accumulated.items():
            self.parent.append(self.owner, role, rows)

    def import_change(self, index: int) -> str | None:
        """The change of import ``index``: its epoch's change at step 0, then none."""
        return self.parent.change(self.owner.inputs[1 + index]) if self.first else None

    def import_integral(self, index: int) -> str:
        """Import ``index`` before the epoch at step 0, after it at later steps."""
        source = self.owner.inputs[1 + index]
        old = self.parent.integral(source)
        change = None if self.first else self.parent.change(source)
        return old if change is None else union_all_sql([old, change])

    def import_integral_at(self, index: int, at: At) -> str | None:
        """``import_integral`` at ``at``'s keys, read through the enclosing run (an
        arrangement lookup where it keeps one) instead of the import's whole integral;
        None when the import cannot be read at keys."""
        source = self.owner.inputs[1 + index]
        old = source.integral_at(self.parent, At(at.columns, at.keys, at.nulls))
        if old is None:
            return None
        names = source.schema.names
        change = None if self.first else self.parent.change(source)
        if change is None:
            return read_sql(old, names)
        return union_all_sql([read_sql(old, names), read_sql(change, names, at)])

    # -- the Run interface -------------------------------------------------------------------

    def change(self, op: Operator) -> str | None:
        if op.fingerprint not in self._change:
            self._change[op.fingerprint] = op.change(self)  # type: ignore[arg-type]
        return self._change[op.fingerprint]

    def integral(self, op: Operator) -> str:
        if op.fingerprint not in self._integral:
            self._integral[op.fingerprint] = op.integral(self)  # type: ignore[arg-type]
        return self._integral[op.fingerprint]

    def source_change(self, name: str, schema: Schema) -> str | None:
        raise TypeError("a recursive step reads relations through its imports")

    def source_integral(self, name: str, schema: Schema, at: At | None = None) -> str:
        raise TypeError("a recursive step reads relations through its imports")

    def read(self, op: Operator, role: str, at: At | None = None, live: bool = False) -> str:
        name = nested_role(op, role)
        stored = self.parent.read(self.owner, name, at)
        if name in self._accumulated:
            names = self._schemas[name].names
            stored = union_all_sql([stored, read_sql(self._accumulated[name], names, at)])
        if not live:
            return stored
        return read_sql(stored, self._schemas[name].names, live=True)

    arranged = False  # a step's traces grow step by step, in scratch tables

    def lookup(
        self, op: Operator, role: str, keys: pa.Table, hashes: np.ndarray
    ) -> tuple[pa.Table, np.ndarray] | None:
        return None

    def relation(self, op: Operator, part: str, rows: pa.Table) -> str:
        return self.parent.relation(op, part, rows)

    def materialize(
        self, op: Operator, part: str, sql: str, rows: Mapping[str, pa.Table] | None = None
    ) -> str:
        return self.parent.materialize(op, part, sql, rows)

    def extend(self, op: Operator, part: str, sql: str) -> str:
        return self.parent.extend(op, part, sql)

    def is_empty(self, sql: str) -> bool:
        return self.parent.is_empty(sql)

    def value(self, op: Operator, sql: str) -> object:
        return self.parent.value(op, sql)

    def fetch(self, op: Operator, sql: str) -> pa.Table:
        return self.parent.fetch(op, sql)

    def memory(self, op: Operator) -> dict[str, Any] | None:
        return None  # a step's integrals grow within the epoch: nothing outlives it

    def after_commit(self, action: Callable[[], None]) -> None:
        self.parent.after_commit(action)

    def append(self, op: Operator, role: str, rows: str) -> None:
        self._pending.append((nested_role(op, role), rows))


@dataclass(frozen=True, eq=False)
class FeedbackSource(Operator):
    """The working tables read inside the step: ΔWⱼ at step j, the tagged working tables
    of the iterations done (before the epoch, plus this epoch's) as the integral."""

    kind = "feedback"

    def change(self, run: Run) -> str | None:
        return _nested(run).feedback_change

    def integral(self, run: Run) -> str:
        return _nested(run).feedback_integral

    def label(self) -> str:
        return f"{self.node.describe()} <- feedback edge"


@dataclass(frozen=True, eq=False)
class ImportSource(Operator):
    """A relation the step reads from the enclosing circuit: its change at step 0."""

    kind = "import"

    def change(self, run: Run) -> str | None:
        return _nested(run).import_change(self.node.index)  # type: ignore[attr-defined]

    def integral(self, run: Run) -> str:
        return _nested(run).import_integral(self.node.index)  # type: ignore[attr-defined]

    def integral_at(self, run: Run, at: At) -> str | None:
        return _nested(run).import_integral_at(self.node.index, at)  # type: ignore[attr-defined]


def _nested(run: Run) -> NestedRun:
    if not isinstance(run, NestedRun):
        raise TypeError("a Feedback or Imported leaf runs only inside a fixed point")
    return run
