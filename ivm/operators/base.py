"""The operator interface: what every incremental operator declares and computes.

An ``Operator`` is one node of an incremental circuit: the incremental form of
one logical plan node (``node``) over the operators of its inputs. Each kind
lives in its own module (``ivm.operators.<kind>``) with its plan node, and
declares, besides its (row, weight) meaning in the module's docstring:

* ``change(run)``: SQL of its change this epoch, from its inputs' changes and
  integrals (DBSP's incremental rule); ``integral(run)``: SQL of its output's
  integral *before* the epoch (what operators above read as "old");
* ``traces()``: the state it keeps, each trace named by its role and the
  operator's fingerprint (never by position);
* ``input_keys()``: per input, the columns its state is partitioned by: what a
  partitioned executor hashes that input on. Keys of co-partitioned inputs (a
  join's sides) are aligned position by position; ``()`` means the operator
  needs all of that input in one place (a global aggregate, a cross join);
  ``None`` means it has no requirement (linear operators);
* ``reads_integrals()``: which inputs' integrals it reads (a join reads both;
  a partitioned executor must keep those inputs' traces beside it);
* ``label()``: its line in ``explain``.

Executors, ``incrementalize``, stage cutting and ``explain`` use only this
interface: adding an operator means one module and one line in
``ivm.operators.REGISTRY``.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
import pyarrow as pa

from ivm.plan.node import Plan
from ivm.plan.sql import empty_relation
from ivm.schema import Schema

STATE_FORMAT = 2
"""Version of how operators lay out and read their state. Bump it when a trace's
meaning changes while its columns stay the same: every view's manifest names
the version its state was written with, and other versions are rebuilt."""

Describe = Callable[[str], Schema]
"""Returns the schema DuckDB gives a query, without running it (types state columns)."""


@dataclass(frozen=True)
class TraceSpec:
    """One trace an operator keeps: its role (unique within the operator), its columns
    (the weight excluded) and the columns it is sorted and partitioned by."""

    role: str
    schema: Schema
    key: tuple[str, ...]


@dataclass(frozen=True)
class At:
    """Where a read of a trace looks: the rows whose ``columns`` equal the values of a row
    of ``keys`` (SQL whose columns give, in order, one value per column of ``columns``).
    With ``nulls``, NULL equals NULL (a group key); without, a NULL key matches nothing
    (a join key)."""

    columns: tuple[str, ...]
    keys: str
    nulls: bool = True
    needed: tuple[str, ...] | None = None
    """The columns of the rows read that the reader uses (None: all): a read of a table
    may leave the others out (an arrangement of those columns only)."""


@runtime_checkable
class Savable(Protocol):
    """A value of an operator's memory that a closing session saves (``Run.memory``)."""

    def to_arrays(self) -> dict[str, Any]:
        """The value as named numpy arrays, for the operator to take back later."""
        ...


@dataclass(frozen=True)
class SavedMemory:
    """An entry of an operator's memory (``Run.memory``) as a closed session saved it:
    the arrays its ``to_arrays()`` gave, for the operator to take back."""

    arrays: Mapping[str, Any]


class Run(Protocol):
    """What an executor offers operators while it computes one epoch.

    SQL passed around is text of a relation with the operator's columns plus
    the weight ``__w`` (a Z-set, not necessarily consolidated).
    """

    @property
    def backfill(self) -> bool:
        """True while the state being computed starts: a view's first epoch (created or
        rebuilt), where every input's change is its whole contents and every integral is
        empty. A constant relation's change is its contents then, and nothing after."""
        ...

    def change(self, op: Operator) -> str | None:
        """SQL of ``op``'s change this epoch; None when it has none."""
        ...

    def integral(self, op: Operator) -> str:
        """SQL of ``op``'s integral before this epoch."""
        ...

    def source_change(self, name: str, schema: Schema) -> str | None:
        """The change of base table or view ``name`` this epoch."""
        ...

    def source_integral(self, name: str, schema: Schema, at: At | None = None) -> str:
        """The contents of base table or view ``name`` before this epoch (rows with
        weights, not consolidated); with ``at``, only the rows at its keys."""
        ...

    def read(self, op: Operator, role: str, at: At | None = None, live: bool = False) -> str:
        """SQL of the rows of ``op``'s trace ``role`` before this epoch, with their weights:
        every row, or with ``at`` only those at its keys. Not consolidated (a row may come
        several times, with any weights), unless ``live``: then each row once with its
        summed weight, kept only where that is positive. The one way an operator reads
        its state: which table or arrangement holds it is the executor's business."""
        ...

    @property
    def arranged(self) -> bool:
        """Whether ``lookup`` can answer: the executor keeps its traces arranged in memory
        (an embedded session's epochs; not backfills, Spark tasks or recursive steps)."""
        ...

    def lookup(
        self, op: Operator, role: str, keys: pa.Table, hashes: np.ndarray
    ) -> tuple[pa.Table, np.ndarray] | None:
        """The live rows of ``op``'s trace ``role`` before this epoch (Arrow: every column
        and the weight) whose key columns (``keys``' column names) equal a row of ``keys``,
        NULL equal to NULL, and for each the row of ``keys`` it is at; ``hashes``: the
        keys' hashes (``key_hash_sql`` over the keys typed as the trace's columns). Runs
        no statement. None when the executor cannot answer so (see ``arranged``; keys
        Arrow cannot compare as DuckDB does; two keys sharing a hash): read instead."""
        ...

    def relation(self, op: Operator, part: str, rows: pa.Table) -> str:
        """SQL reading ``rows`` (what ``op`` computed in memory) for the rest of the
        epoch, as a scratch table would be read, without copying them."""
        ...

    def materialize(
        self, op: Operator, part: str, sql: str, rows: Mapping[str, pa.Table] | None = None
    ) -> str:
        """Run ``sql`` into a scratch table now; returns SQL reading it. ``rows``: tables
        ``sql`` reads by name (what an operator computed in memory), for that statement."""
        ...

    def append(self, op: Operator, role: str, rows: str) -> None:
        """Append ``rows`` to ``op``'s trace ``role`` once every view has computed its
        change (until then every read sees the trace as it was before the epoch)."""
        ...

    def extend(self, op: Operator, part: str, sql: str) -> str:
        """Append the rows of ``sql`` now to scratch table ``part``, which ``materialize``
        filled earlier this epoch; returns SQL reading it (a fixed point's accumulators)."""
        ...

    def is_empty(self, sql: str) -> bool:
        """True when ``sql`` reads a scratch table this epoch filled with no rows."""
        ...

    @property
    def epoch(self) -> int:
        """The epoch being computed (a backfill: the epoch the view starts at)."""
        ...

    @property
    def iteration_limit(self) -> int:
        """The most iterations a recursion may take within one epoch (the session's)."""
        ...

    def value(self, op: Operator, sql: str) -> object:
        """Run ``sql`` (one row, one column) now for ``op`` and return its value: for a
        choice between two ways of computing a change (a TopK's refill)."""
        ...

    def fetch(self, op: Operator, sql: str) -> pa.Table:
        """Run ``sql`` now for ``op`` and return its rows (small results only: what an
        operator computes on in memory, e.g. an ASOF join's changed points)."""
        ...

    def memory(self, op: Operator) -> dict[str, Any] | None:
        """What the executor keeps in memory for ``op`` from one epoch of this session to
        the next, or None where it keeps nothing (Spark tasks, backfills, the iterations
        of a recursion). Only what can be rebuilt from ``op``'s inputs' integrals may be
        kept there, changed only by an ``after_commit`` action (an epoch rolled back
        leaves it as it was); an operator that computes a change without keeping it up to
        date clears it, and the executor drops it for an operator whose inputs changed
        but whose change was not computed.

        A ``Savable`` value (``to_arrays()``: named numpy arrays) is saved when a
        persistent session closes; the next session's operator finds it as a
        ``SavedMemory`` of those arrays, to take back in its own terms (or ignore)."""
        ...

    def after_commit(self, action: Callable[[], None]) -> None:
        """Run ``action`` once the epoch has committed (never if it rolls back)."""
        ...


@dataclass(frozen=True, eq=False)
class Operator:
    """One incremental operator (see the module docstring for the interface)."""

    node: Plan
    inputs: tuple[Operator, ...]

    kind: ClassVar[str] = "operator"
    """Short name of the operator kind (explain, Spark stage directories)."""
    linear: ClassVar[bool] = False
    """True when the change is a function of the inputs' changes alone (no state)."""

    @property
    def schema(self) -> Schema:
        """The operator's output columns."""
        return self.node.schema

    @cached_property
    def fingerprint(self) -> str:
        """Stable identity: the operator kind and its plan node's fingerprint."""
        return hashlib.sha256(f"{self.kind}\x1f{self.node.fingerprint()}".encode()).hexdigest()

    def with_inputs(self, inputs: Sequence[Operator]) -> Operator:
        """The same operator over other inputs (whose nodes replace its node's children)."""
        inputs = tuple(inputs)
        node = self.node.with_children([i.node for i in inputs])
        return dataclasses.replace(self, node=node, inputs=inputs)

    # -- declarations ------------------------------------------------------------------------

    def traces(self) -> tuple[TraceSpec, ...]:
        """The traces this operator keeps (none by default)."""
        return ()

    def input_keys(self) -> tuple[tuple[str, ...] | None, ...]:
        """Per input, the columns its state is partitioned by (see the module docstring)."""
        return tuple(None for _ in self.inputs)

    def replicated_inputs(self) -> tuple[bool, ...]:
        """Per input, whether every partition reads all of it (partitioned execution), not
        only its rows of the partition's keys (none by default)."""
        return tuple(False for _ in self.inputs)

    def output_key(self) -> tuple[str, ...] | None:
        """Output columns holding the values of the first input's partition key (so equal
        output rows share a partition; ``()`` when the operator runs in one place), or
        None. By default the key's own columns, when the output keeps them (a join, GROUP
        BY, DISTINCT)."""
        keys = self.input_keys()
        if not keys or keys[0] is None:
            return None
        return keys[0] if all(k in self.schema.names for k in keys[0]) else None

    def reads_integrals(self) -> tuple[bool, ...]:
        """Per input, whether the operator reads that input's integral."""
        return tuple(False for _ in self.inputs)

    def label(self) -> str:
        """One line for ``explain``."""
        return self.node.describe()

    def nested_lines(self) -> list[str]:
        """Lines ``explain`` shows under the operator's own: a child circuit (none here)."""
        return []

    # -- computation -------------------------------------------------------------------------

    def change(self, run: Run) -> str | None:
        """SQL of this operator's change this epoch; None when it has none."""
        if not self.linear:
            raise NotImplementedError(type(self).__name__)
        return self.linear_sql([run.change(i) for i in self.inputs])

    def integral(self, run: Run) -> str:
        """SQL of this operator's integral before the epoch."""
        if not self.linear:
            raise NotImplementedError(type(self).__name__)
        result = self.linear_sql([run.integral(i) for i in self.inputs])
        assert result is not None
        return result

    def integral_at(self, run: Run, at: At) -> str | None:
        """SQL of this operator's integral before the epoch restricted to the rows ``at``
        keys, when the restriction can be applied below the integral's own consolidation
        (a join reads an input's integral at the keys of another input's change); None:
        read ``integral``. A one-input linear operator passes it to its input."""
        plain_integral = type(self).integral is Operator.integral
        if not (self.linear and plain_integral and len(self.inputs) == 1):
            return None
        origins = [self.column_origin(c) for c in at.columns]
        if any(o is None for o in origins):
            return None
        needed = self.columns_read(at.needed)
        inner = self.inputs[0].integral_at(
            run, At(tuple(origins), at.keys, at.nulls, needed)  # type: ignore[arg-type]
        )
        return None if inner is None else self.linear_sql([inner])

    def columns_read(self, needed: tuple[str, ...] | None) -> tuple[str, ...] | None:
        """The input columns a linear operator's SQL reads to give its output columns
        ``needed`` (None: all of them), or None when it may read every input column."""
        return None

    def global_input_change(self, run: Run) -> str | None:
        """The first input's change, for an operator with output over no rows (a global
        aggregate's one row): when a view's state starts, an input without rows has no
        change, yet the operator must emit that output, so it sees an empty change."""
        change = run.change(self.inputs[0])
        if change is None and run.backfill:
            return empty_relation(self.inputs[0].schema)
        return change

    # -- linear operators --------------------------------------------------------------------

    def linear_sql(self, inputs: Sequence[str | None]) -> str | None:
        """A linear operator applied to its inputs' Z-sets (None for an absent one)."""
        raise NotImplementedError(type(self).__name__)

    def column_origin(self, column: str) -> str | None:
        """For a one-input linear operator: the input column that output ``column`` is,
        unchanged; None when it is computed."""
        return None

    def input_signs(self) -> tuple[int, ...]:
        """For a linear operator of several inputs: the sign each input's rows enter the
        output with (its output is the signed sum of its inputs)."""
        return tuple(1 for _ in self.inputs)

