"""One epoch's iterations of a fixed point, in order: the SQL of each ΔWⱼ.

``ivm.operators.fixed_point`` explains the rule; here are its two forms, UNION ALL
(ΔWⱼ is ΔNⱼ) and UNION (the births rule), and the choice of the next iteration with
anything to do.

*Pending* holds every contribution to some Nⱼ this epoch (rows, iteration, weight):
the seeds (the anchor's change at 0, the imports' effect at j + 1 for every j), then
each step's output. A UNION row that must be looked at again at a later iteration
without a derivation changing there (it lost its birth and has older derivations
later on; it was born earlier and must leave the working table of its old birth) gets
a zero-weight *marker* in pending at that iteration. So the rows examined at
iteration j are exactly pending's rows at j, and the iterations visited are the ones
pending holds: Python keeps that set, so no statement looks for the next one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ivm.errors import IterationLimitError
from ivm.operators.base import At, Run
from ivm.operators.nested_run import NestedRun
from ivm.operators.recursive import ITER, tagged_schema
from ivm.plan.sql import W, column_list, empty_relation, null_safe_match, union_all_sql

if TYPE_CHECKING:
    from ivm.operators.fixed_point import FixedPoint

WORKING = "working"
DERIVATIONS = "derivations"
BIRTHS = "births"


def next_iteration(derived: str, names: list[str]) -> str:
    """Rows the step derived from Wⱼ, as contributions to Nⱼ₊₁."""
    return f"SELECT {column_list(names)}, {ITER} + 1 AS {ITER}, {W} FROM ({derived})"


class Loop:
    """One epoch's iterations of a fixed point, in order."""

    def __init__(self, op: FixedPoint, run: Run, nested: NestedRun, pending: str) -> None:
        self.op, self.run, self.nested = op, run, nested
        self.names = op.schema.names
        self.pending = pending
        # ΔWⱼ of the iterations done so far (cols, iter, w): a scratch table from the
        # first iteration that changes a working table on
        self.changes = empty_relation(tagged_schema(op.schema))
        self.changed = False
        self.todo: set[int] = set()

    def iterate(self) -> str | None:
        """Run the iterations; SQL of every ΔWⱼ (None: no working table changed)."""
        found = self.run.value(self.op, f"SELECT list(DISTINCT {ITER}) FROM ({self.pending})")
        self.todo = {int(i) for i in found or []}  # type: ignore[union-attr]
        limit = self.run.iteration_limit
        while self.todo:
            iteration = min(self.todo)
            self.todo.discard(iteration)
            if iteration > limit:
                raise IterationLimitError(
                    f"the recursive CTE {self.op.recursive.name!r} has not reached a fixed "
                    f"point after {limit} iterations (the session's iteration_limit); "
                    "the batch is rejected"
                )
            step = self.working_change(iteration)
            if step is None:
                continue
            derived = self.nested.step(step)
            if derived is not None:
                self.run.extend(self.op, DERIVATIONS, next_iteration(derived, self.names))
                self.todo.add(iteration + 1)
            self._record(step)
        return self.changes if self.changed else None

    def working_change(self, iteration: int) -> str | None:
        """SQL of ΔWⱼ for j = ``iteration`` (cols, iter, w), materialized; None if empty."""
        raise NotImplementedError

    def _record(self, step: str) -> None:
        """Add ΔWⱼ to the changes (the working tables the next iterations read)."""
        if self.changed:
            self.run.extend(self.op, "changes", step)
            return
        self.changes = self.run.materialize(self.op, "changes", step)
        self.changed = True
        old = self.run.read(self.op, WORKING if self.op.recursive.union_all else BIRTHS)
        self.nested.feedback_integral = union_all_sql([old, self.changes])


class UnionAllLoop(Loop):
    """UNION ALL: ΔWⱼ is ΔNⱼ."""

    def working_change(self, iteration: int) -> str | None:
        cols = column_list(self.names)
        step = self.run.materialize(self.op, "step", (
            f"SELECT {cols}, {iteration}::BIGINT AS {ITER}, SUM({W})::BIGINT AS {W} "
            f"FROM ({self.pending}) AS p WHERE {ITER} = {iteration} "
            f"GROUP BY ALL HAVING SUM({W}) <> 0"
        ))
        return None if self.run.is_empty(step) else step

    def iterate(self) -> str | None:
        changes = super().iterate()
        if changes is not None:
            self.run.append(self.op, WORKING, changes)
        return changes


class UnionLoop(Loop):
    """UNION: ΔWⱼ from the births rule (see ``ivm.operators.fixed_point``)."""

    def iterate(self) -> str | None:
        changes = super().iterate()
        if changes is not None:
            self.run.append(self.op, BIRTHS, changes)
        derivations = f"SELECT * FROM ({self.pending}) AS p WHERE {W} <> 0"  # not the markers
        self.run.append(self.op, DERIVATIONS, derivations)
        return changes

    def working_change(self, j: int) -> str | None:
        decided = self.run.materialize(self.op, "decided", self._decided_sql(j))
        if self.run.is_empty(decided):
            return None
        found = self.run.value(self.op, (
            f"SELECT {{'changed': bool_or({W} <> 0), 'later': list(DISTINCT __ivm_later) "
            f"FILTER (WHERE __ivm_later IS NOT NULL)}} FROM ({decided}) AS d"
        ))
        assert isinstance(found, dict)
        later = [int(i) for i in found["later"] or []]
        cols = column_list(self.names)
        if later:
            self.todo.update(later)
            self.run.extend(self.op, DERIVATIONS, (
                f"SELECT {cols}, __ivm_later AS {ITER}, 0::BIGINT AS {W} FROM ({decided}) AS d "
                "WHERE __ivm_later IS NOT NULL"
            ))
        if not found["changed"]:
            return None
        return self.run.materialize(self.op, "step", (
            f"SELECT {cols}, {j}::BIGINT AS {ITER}, {W} FROM ({decided}) AS d WHERE {W} <> 0"
        ))

    def _decided_sql(self, j: int) -> str:
        """Per row examined at iteration j: its change in Wⱼ (``__w``, −1, 0 or +1) and the
        later iteration it must be examined at again (``__ivm_later``), for the rows with
        either. A row is examined when pending holds it at j (a derivation changed, or a
        marker); what decides is, per row and iteration, the weights of pending at j
        (kind p), the old derivations from j on (n), the old births (b) and this epoch's
        births so far (c): one GROUP BY, where NULL values group as equal."""
        names = self.names
        cols = column_list(names)
        examined = (
            f"SELECT DISTINCT {cols} FROM ({self.pending}) AS p WHERE {ITER} = {j}"
        )
        births = self.run.read(self.op, BIRTHS, At(tuple(names), examined))
        counts = self.run.read(self.op, DERIVATIONS, At(tuple(names), examined))

        def rows(kind: str, source: str, where: str = "") -> str:
            return (
                f"SELECT {column_list(names, 'x')}, '{kind}' AS __ivm_kind, x.{ITER}, x.{W} "
                f"FROM ({source}) AS x{where}"
            )

        def total(kinds: str, condition: str) -> str:
            return (
                f"SUM(CASE WHEN __ivm_kind IN ({kinds}) AND {condition} THEN __ivm_s "
                "ELSE 0 END)"
            )

        return f"""
WITH k AS ({examined}),
facts AS (
  SELECT {cols}, 'p' AS __ivm_kind, {ITER}, {W} FROM ({self.pending}) AS p
    WHERE {ITER} = {j}
  UNION ALL {rows('n', counts, f" WHERE x.{ITER} >= {j}")}
  UNION ALL {rows('b', births)}
  UNION ALL {rows('c', f"SELECT * FROM ({self.changes}) AS __c SEMI JOIN k ON "
                      f"{null_safe_match(names, '__c', 'k')}")}),
sums AS (SELECT {cols}, __ivm_kind, {ITER}, SUM({W}) AS __ivm_s FROM facts GROUP BY ALL),
rows AS (SELECT {cols},
    {total("'p', 'n'", f"{ITER} = {j}")} > 0 AS __ivm_derived,
    {total("'b', 'c'", f"{ITER} < {j}")} > 0 AS __ivm_before,
    {total("'b'", f"{ITER} = {j}")} > 0 AS __ivm_was,
    MIN(CASE WHEN __ivm_kind = 'b' AND __ivm_s > 0 AND {ITER} > {j} THEN {ITER} END)
      AS __ivm_old_birth,
    MIN(CASE WHEN __ivm_kind = 'n' AND __ivm_s > 0 AND {ITER} > {j} THEN {ITER} END)
      AS __ivm_next_derivation
  FROM sums GROUP BY ALL),
decided AS (SELECT {cols},
    (CASE WHEN NOT __ivm_before AND __ivm_derived THEN 1 ELSE 0 END)
      - (CASE WHEN __ivm_was THEN 1 ELSE 0 END) AS {W},
    CASE WHEN __ivm_before THEN NULL
         WHEN __ivm_derived THEN __ivm_old_birth
         ELSE __ivm_next_derivation END AS __ivm_later
  FROM rows)
SELECT * FROM decided WHERE {W} <> 0 OR __ivm_later IS NOT NULL"""
