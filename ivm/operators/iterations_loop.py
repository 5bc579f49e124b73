"""One epoch's iterations of a fixed point, in order: the SQL of each ΔWⱼ.

``ivm.operators.fixed_point`` explains the rule; here are its two forms, UNION ALL
(ΔWⱼ is ΔNⱼ) and UNION (the births rule), and the choice of the next iteration with
anything to do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ivm.errors import IterationLimitError
from ivm.operators.base import Run
from ivm.operators.nested_run import NestedRun
from ivm.operators.recursive import ITER
from ivm.plan.sql import W, column_list, empty_relation, null_safe_match
from ivm.schema import Column, Schema

if TYPE_CHECKING:
    from ivm.operators.fixed_point import FixedPoint

WORKING = "working"
DERIVATIONS = "derivations"
BIRTHS = "births"


def tagged(schema: Schema) -> Schema:
    """``schema`` with the iteration column last."""
    return Schema((*schema.columns, Column(ITER, "BIGINT")))


def next_iteration(derived: str, names: list[str]) -> str:
    """Rows the step derived from Wⱼ, as contributions to Nⱼ₊₁."""
    return f"SELECT {column_list(names)}, {ITER} + 1 AS {ITER}, {W} FROM ({derived})"


class Loop:
    """One epoch's iterations of a fixed point, in order."""

    def __init__(self, op: FixedPoint, run: Run, nested: NestedRun, pending: str) -> None:
        self.op, self.run, self.nested = op, run, nested
        self.names = op.schema.names
        self.pending = pending  # every contribution to some Nⱼ this epoch (cols, iter, w)
        # ΔWⱼ of the iterations done so far (cols, iter, w): a scratch table from the
        # first iteration that changes a working table on
        self.changes = empty_relation(tagged(op.schema))
        self.changed = False

    def iterate(self) -> str | None:
        """Run the iterations; SQL of every ΔWⱼ (None: no working table changed)."""
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
            if not self.run.is_empty(step):
                derived = self.nested.step(step)
                if derived is not None:
                    self.run.extend(self.op, DERIVATIONS, next_iteration(derived, self.names))
                self._record(step)
            current = self.run.value(self.op, self.next_sql(iteration))
        return self.changes if self.changed else None

    def _record(self, step: str) -> None:
        """Add ΔWⱼ to the changes (the working tables the next iterations read)."""
        if self.changed:
            self.run.extend(self.op, "changes", step)
            return
        self.changes = self.run.materialize(self.op, "changes", step)
        self.changed = True
        old = self.run.trace(self.op, WORKING if self.op.recursive.union_all else BIRTHS)
        self.nested.feedback_integral = f"SELECT * FROM {old} UNION ALL {self.changes}"

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


class UnionAllLoop(Loop):
    """UNION ALL: ΔWⱼ is ΔNⱼ."""

    def working_change(self, iteration: int) -> str:
        cols = column_list(self.names)
        return (
            f"SELECT {cols}, {iteration}::BIGINT AS {ITER}, SUM({W})::BIGINT AS {W} "
            f"FROM ({self.pending}) AS p WHERE {ITER} = {iteration} "
            f"GROUP BY ALL HAVING SUM({W}) <> 0"
        )

    def iterate(self) -> str | None:
        changes = super().iterate()
        if changes is not None:
            self.run.append(self.run.trace(self.op, WORKING), changes)
        return changes


class UnionLoop(Loop):
    """UNION: ΔWⱼ from the births rule (see the module docstring)."""

    def iterate(self) -> str | None:
        changes = super().iterate()
        if changes is not None:
            self.run.append(self.run.trace(self.op, BIRTHS), changes)
        self.run.append(self.run.trace(self.op, DERIVATIONS), self.pending)
        return changes

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


