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

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ivm.errors import IterationLimitError
from ivm.operators.base import Operator, Run, TraceSpec
from ivm.operators.recursive import ITER, Recursive
from ivm.plan.sql import (
    W,
    column_list,
    empty_relation,
    null_safe_match,
    union_all_sql,
)
from ivm.schema import Column, Schema

if TYPE_CHECKING:
    from ivm.circuit.circuit import Circuit

WORKING = "working"
DERIVATIONS = "derivations"
BIRTHS = "births"
NESTED_ROLE_CHARS = 12
"""Hex digits of a step operator's fingerprint in the name of its trace."""


def tagged(schema: Schema) -> Schema:
    """``schema`` with the iteration column last."""
    return Schema((*schema.columns, Column(ITER, "BIGINT")))


@dataclass(frozen=True, eq=False)
class FixedPoint(Operator):
    """WITH RECURSIVE: iterations maintained in product order (see the module docstring).

    Inputs: the anchor, then the step's imports; ``child`` is the tagged step's circuit.
    """

    child: Circuit | None = field(default=None)
    kind = "fixed_point"

    @property
    def recursive(self) -> Recursive:
        """The plan node."""
        assert isinstance(self.node, Recursive)
        return self.node

    @property
    def step_circuit(self) -> Circuit:
        """The child circuit (the tagged step)."""
        assert self.child is not None
        return self.child

    # -- declarations ------------------------------------------------------------------------

    def traces(self) -> tuple[TraceSpec, ...]:
        names = tuple(self.schema.names)
        schema = tagged(self.schema)
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

    def input_keys(self) -> tuple[tuple[str, ...] | None, ...]:
        return tuple(() for _ in self.inputs)  # the iterations run in one place

    def output_key(self) -> tuple[str, ...] | None:
        return None

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
        trace = run.trace(self, WORKING if self.recursive.union_all else BIRTHS)
        return f"SELECT {column_list(self.schema.names)}, {W} FROM {trace}"

    def change(self, run: Run) -> str | None:
        anchor = run.change(self.inputs[0])
        imports = [run.change(i) for i in self.inputs[1:]]
        if anchor is None and all(i is None for i in imports):
            return None
        names = self.schema.names
        changes = run.materialize(self, "changes", empty_relation(tagged(self.schema)))
        old = run.trace(self, WORKING if self.recursive.union_all else BIRTHS)
        nested = NestedRun(run, self, f"SELECT * FROM {old} UNION ALL {changes}")
        seeds = []
        if anchor is not None:
            seeds.append(f"SELECT {column_list(names)}, 0::BIGINT AS {ITER}, {W} FROM ({anchor})")
        if any(i is not None for i in imports):
            derived = nested.step(None)
            if derived is not None:
                seeds.append(_next_iteration(derived, names))
        if not seeds:
            return None
        pending = run.materialize(self, DERIVATIONS, union_all_sql(seeds))
        loop = _UnionAllLoop if self.recursive.union_all else _UnionLoop
        loop(self, run, nested, pending, changes).iterate()
        nested.finish()
        return f"SELECT {column_list(names)}, {W} FROM ({changes})"


def nested_role(op: Operator, role: str) -> str:
    """The name, among its fixed point's traces, of trace ``role`` of step operator ``op``."""
    return f"{role}.{op.fingerprint[:NESTED_ROLE_CHARS]}"


def _next_iteration(derived: str, names: Sequence[str]) -> str:
    """Rows the step derived from Wⱼ, as contributions to Nⱼ₊₁."""
    return f"SELECT {column_list(names)}, {ITER} + 1 AS {ITER}, {W} FROM ({derived})"


class _Loop:
    """One epoch's iterations of a fixed point, in order."""

    def __init__(
        self, op: FixedPoint, run: Run, nested: NestedRun, pending: str, changes: str
    ) -> None:
        self.op, self.run, self.nested = op, run, nested
        self.names = op.schema.names
        self.pending = pending  # every contribution to some Nⱼ this epoch (cols, iter, w)
        self.changes = changes  # ΔWⱼ of the iterations done so far (cols, iter, w)

    def iterate(self) -> None:
        current = self.run.value(self.op, f"SELECT MIN({ITER}) FROM ({self.pending})")
        limit = self.run.iteration_limit
        while current is not None:
            iteration = int(current)  # type: ignore[call-overload]
            if iteration > limit:
                raise IterationLimitError(
                    f"the recursive CTE {self.op.recursive.name!r} has not reached a fixed "
                    f"point after {limit} iterations (the session's iteration_limit); "
                    "the batch is rejected"
                )
            step = self.run.materialize(self.op, "step", self.working_change(iteration))
            derived = self.nested.step(step)
            if derived is not None:
                self.run.extend(self.op, DERIVATIONS, _next_iteration(derived, self.names))
            self.run.extend(self.op, "changes", step)
            current = self.run.value(self.op, self.next_sql(iteration))

    def working_change(self, iteration: int) -> str:
        """SQL of ΔWⱼ for j = ``iteration`` (cols, iter, w)."""
        raise NotImplementedError

    def next_sql(self, iteration: int) -> str:
        """SQL of the next iteration with anything to do (NULL: none)."""
        return f"SELECT MIN({ITER}) FROM ({self.pending}) AS p WHERE {ITER} > {iteration}"

    def derivations_at(self, iteration: int) -> str:
        """ΔNⱼ, consolidated (cols, ``__ivm_delta``)."""
        cols = column_list(self.names)
        return (
            f"SELECT {cols}, SUM({W}) AS __ivm_delta FROM ({self.pending}) AS p "
            f"WHERE {ITER} = {iteration} GROUP BY ALL"
        )


class _UnionAllLoop(_Loop):
    """UNION ALL: ΔWⱼ is ΔNⱼ."""

    def working_change(self, iteration: int) -> str:
        cols = column_list(self.names)
        return (
            f"SELECT {cols}, {iteration}::BIGINT AS {ITER}, SUM({W})::BIGINT AS {W} "
            f"FROM ({self.pending}) AS p WHERE {ITER} = {iteration} "
            f"GROUP BY ALL HAVING SUM({W}) <> 0"
        )

    def iterate(self) -> None:
        super().iterate()
        self.run.append(self.run.trace(self.op, WORKING), self.changes)


class _UnionLoop(_Loop):
    """UNION: ΔWⱼ from the births rule (see the module docstring)."""

    def iterate(self) -> None:
        super().iterate()
        self.run.append(self.run.trace(self.op, BIRTHS), self.changes)
        self.run.append(self.run.trace(self.op, DERIVATIONS), self.pending)

    def working_change(self, j: int) -> str:
        names = self.names
        cols = column_list(names)
        births = self.run.trace(self.op, BIRTHS)
        counts = self.run.trace(self.op, DERIVATIONS)

        def match(a: str, b: str) -> str:
            return null_safe_match(names, a, b)

        return f"""
WITH d AS ({self.derivations_at(j)}),
k AS (SELECT {cols} FROM d UNION SELECT {cols} FROM ({self.changes}) AS c),
n AS (SELECT {column_list(names, 'x')}, SUM(x.{W}) AS __ivm_count
      FROM {counts} AS x SEMI JOIN k ON {match('x', 'k')}
      WHERE x.{ITER} = {j} GROUP BY ALL),
bo AS (SELECT {column_list(names, 'x')}, true AS __ivm_was FROM {births} AS x
       SEMI JOIN k ON {match('x', 'k')} WHERE x.{ITER} = {j} GROUP BY ALL
       HAVING SUM(x.{W}) > 0),
bn AS (SELECT {cols}, bool_or({ITER} < {j}) AS __ivm_before FROM (
         SELECT {cols}, {ITER} FROM (
           SELECT {column_list(names, 'x')}, x.{ITER}, x.{W} FROM {births} AS x
             SEMI JOIN k ON {match('x', 'k')}
           UNION ALL SELECT {cols}, {ITER}, {W} FROM ({self.changes}) AS c
         ) AS b GROUP BY ALL HAVING SUM({W}) > 0
       ) AS live GROUP BY ALL),
m AS (SELECT {column_list(names, 'k')},
        CASE WHEN COALESCE(bn.__ivm_before, false) THEN 0
             WHEN COALESCE(n.__ivm_count, 0) + COALESCE(d.__ivm_delta, 0) > 0 THEN 1
             ELSE 0 END AS __ivm_new,
        CASE WHEN COALESCE(bo.__ivm_was, false) THEN 1 ELSE 0 END AS __ivm_old
      FROM k LEFT JOIN d ON {match('k', 'd')} LEFT JOIN n ON {match('k', 'n')}
      LEFT JOIN bn ON {match('k', 'bn')} LEFT JOIN bo ON {match('k', 'bo')})
SELECT {cols}, {j}::BIGINT AS {ITER}, (__ivm_new - __ivm_old)::BIGINT AS {W}
FROM m WHERE __ivm_new <> __ivm_old"""

    def next_sql(self, j: int) -> str:
        names = self.names
        cols = column_list(names)
        births = self.run.trace(self.op, BIRTHS)
        counts = self.run.trace(self.op, DERIVATIONS)

        def match(a: str, b: str) -> str:
            return null_safe_match(names, a, b)

        return f"""
WITH t AS (SELECT DISTINCT {cols} FROM ({self.changes}) AS c),
live AS (SELECT {cols} FROM (
           SELECT {column_list(names, 'x')}, x.{ITER}, x.{W} FROM {births} AS x
             SEMI JOIN t ON {match('x', 't')}
           UNION ALL SELECT {cols}, {ITER}, {W} FROM ({self.changes}) AS c
         ) AS b GROUP BY {cols}, {ITER} HAVING SUM({W}) > 0),
unborn AS (SELECT * FROM t EXCEPT SELECT * FROM live)
SELECT MIN(i) FROM (
  SELECT MIN({ITER}) AS i FROM ({self.pending}) AS p WHERE {ITER} > {j}
  UNION ALL SELECT MIN(x.{ITER}) FROM {counts} AS x SEMI JOIN unborn AS u
    ON {match('x', 'u')} WHERE x.{ITER} > {j}
  UNION ALL SELECT MIN(x.{ITER}) FROM {births} AS x SEMI JOIN t ON {match('x', 't')}
    WHERE x.{ITER} > {j}
) AS candidates"""


class NestedRun:
    """The ``Run`` a fixed point's child circuit computes against, one step at a time.

    Step 0 of an epoch carries the imports' changes (the working tables unchanged);
    each later step carries one iteration's ΔWⱼ (imports at their new contents). The
    child's traces grow step by step: what a step appends goes to a scratch
    accumulator at once (read with the trace by the next steps) and to the trace
    itself when the epoch commits.
    """

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
        self._roles: dict[str, str] = {}  # text trace() returned → nested role
        self._accumulated: dict[str, str] = {}  # nested role → SQL reading its accumulator

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
            self.parent.append(self.parent.trace(self.owner, role), rows)

    def import_change(self, index: int) -> str | None:
        """The change of import ``index``: its epoch's change at step 0, then none."""
        return self.parent.change(self.owner.inputs[1 + index]) if self.first else None

    def import_integral(self, index: int) -> str:
        """Import ``index`` before the epoch at step 0, after it at later steps."""
        source = self.owner.inputs[1 + index]
        old = self.parent.integral(source)
        change = None if self.first else self.parent.change(source)
        return old if change is None else union_all_sql([old, change])

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

    def source_integral(self, name: str, schema: Schema) -> str:
        raise TypeError("a recursive step reads relations through its imports")

    def trace(self, op: Operator, role: str) -> str:
        name = nested_role(op, role)
        table = self.parent.trace(self.owner, name)
        if name in self._accumulated:
            text = f"(SELECT * FROM {table} UNION ALL {self._accumulated[name]})"
        else:
            text = table
        self._roles[text] = name
        return text

    def materialize(self, op: Operator, part: str, sql: str) -> str:
        return self.parent.materialize(op, part, sql)

    def extend(self, op: Operator, part: str, sql: str) -> str:
        return self.parent.extend(op, part, sql)

    def value(self, op: Operator, sql: str) -> object:
        return self.parent.value(op, sql)

    def append(self, trace: str, rows: str) -> None:
        self._pending.append((self._roles[trace], rows))


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


def _nested(run: Run) -> NestedRun:
    if not isinstance(run, NestedRun):
        raise TypeError("a Feedback or Imported leaf runs only inside a fixed point")
    return run
