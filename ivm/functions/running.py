"""Running forms: functions kept from running state per group, recomputed only when flagged.

A third class beside *invertible* and *per key* (``ivm.functions.aggregates``),
for functions whose value a change updates from its own rows *almost* always:
the state per group is running, but a guard (``flag``) says when it cannot give
the value, and only such groups are recomputed from their live rows (by
``ivm.operators.running_aggregate``, which keeps the input by key for them).

A form declares, for one call (``{x}`` its argument, ``w`` the weight a row gives
it: zero where its FILTER is not true):

* ``moments``: exact running sums (counts), updated as invertible moments are;
* ``state``: the rest of the state, (name, type) pairs, not invertible;
* ``partials``: aggregates over a change's consolidated rows;
* ``combine``: the new state from the old state, the partials and the new moments;
* ``flag``: true when the new state cannot give the value: the group is then
  recomputed;
* ``recompute``: each state column as an aggregate over the group's live rows;
* ``finalize``: the value.

Two kinds (Materialize's accumulable-with-care and hierarchical reductions):

* ``FloatSum``: SUM/AVG over DOUBLE or REAL (summed as DOUBLE, as DuckDB does),
  kept exactly (``ivm.functions.exact_sum``). Non-finite values are counted apart
  (exact moments: ``up`` counts +inf and NaN, ``down`` −inf and NaN), so the value
  follows IEEE (NaN if any NaN or both infinities, else the infinity present); the
  finite values in range are summed as exact fixed-point limbs (HUGEINT moments),
  and the value is their sum rounded once to the nearest DOUBLE: for one row, its
  value; for several, one of the answers DuckDB's order-dependent SUM gives, and
  never anything of rows since deleted (1e17 + 1 − 1e17 is 1, 99.9 alone is 99.9).
  Finite values out of range (below 2^-96's precision, 2^93 or beyond) are counted
  apart too (``out``, which counts the non-finite ones as well); a group holding any
  is flagged whenever a change touches it, and its value is DuckDB's SUM over its
  live rows, until none is left. State ``s`` holds the finite sum either way.
* ``Extreme``: MIN/MAX: the current extreme ``m`` and a count ``c`` of live rows
  holding it, never more than there are. A change improves on ``m`` only by
  inserting; its deletes matter only when they take every counted copy of ``m``,
  and then only if it inserts nothing at least as good and does not refill an
  emptied group: that case, with values left, is the one flagged (m unknown).
  The count is exact where rows hold distinct values (the aggregate reads one
  column: rows are consolidated per value) and a change deletes at most one
  value of the group; otherwise it may be low (several rows inserting one value
  count as one row's copies; a change that deletes the extreme among other
  values counts all its deleted copies as the extreme's). A low count is safe:
  its copies run out early and the group is recomputed, never kept wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ivm.functions import exact_sum
from ivm.functions.moments import NON_NULL, Invertible, Moment

Refs = Mapping[str, str]
"""SQL of a form's columns (moments, state or partials) by name."""

Named = tuple[tuple[str, str], ...]
"""(name, SQL) pairs."""


@dataclass(frozen=True)
class Running:
    """A running form (see the module docstring); this base is the exact one: an
    invertible form, whose moments are all its state and which is never flagged."""

    moments: tuple[Moment, ...]

    def state(self, arg_type: str) -> Named:
        """State columns beyond the moments: (name, DuckDB type)."""
        return ()

    def partials(self, x: str, w: str) -> Named:
        """(name, aggregate) over a change's rows: argument ``x``, weight ``w``."""
        return ()

    def partial_names(self) -> tuple[str, ...]:
        """The names ``partials`` gives."""
        return tuple(name for name, _ in self.partials("", ""))

    def combine(self, old: Refs, part: Refs, new: Refs) -> dict[str, str]:
        """SQL of each state column after the change (``new``: the moments after it)."""
        return {}

    def flag(self, new: Refs) -> str:
        """SQL: the group's state cannot give the value (recompute it)."""
        return "false"

    def recompute(self, x: str, w: str) -> dict[str, str]:
        """Each state column as an aggregate over a group's live rows."""
        return {}

    def finalize(self, new: Refs) -> str:
        """SQL of the value (NULL where the group has no argument values)."""
        raise NotImplementedError(type(self).__name__)

    def kept(self) -> Running:
        """What the state depends on: calls whose forms keep equal things over one
        argument and FILTER share one state (SUM and AVG of a column: one sum)."""
        return self


@dataclass(frozen=True)
class Exact(Running):
    """An invertible form, run beside running ones in one aggregate."""

    invertible: Invertible | None = None

    def finalize(self, new: Refs) -> str:
        assert self.invertible is not None
        return self.invertible.finalize(new)


def exact(form: Invertible) -> Exact:
    """``form`` as a running form."""
    return Exact(form.moments, invertible=form)


@dataclass(frozen=True)
class FloatSum(Running):
    """SUM or AVG over DOUBLE/REAL: non-finite values counted, finite ones summed exactly
    (see the module docstring). ``widen``: the argument is REAL, summed as DOUBLE."""

    average: bool = False
    widen: bool = False

    def kept(self) -> Running:
        return replace(self, average=False)

    def state(self, arg_type: str) -> Named:
        # The finite values' sum: the limbs' rounded once, or where some value is out of
        # their range, DuckDB's SUM of the live rows (so SUM and AVG round once, together).
        return (("s", "DOUBLE"),)

    def combine(self, old: Refs, part: Refs, new: Refs) -> dict[str, str]:
        exact = exact_sum.rounded([new[f"l{i}"] for i in range(exact_sum.LIMBS)])
        return {"s": f"CASE WHEN {new['out']} > 0 THEN NULL ELSE {exact} END"}

    def flag(self, new: Refs) -> str:
        # The value depends on the sum only where no NaN or infinity is live.
        return f"({new['n']} > 0 AND {new['up']} = 0 AND {new['down']} = 0 AND {new['out']} > 0)"

    def recompute(self, x: str, w: str) -> dict[str, str]:
        value = f"CAST({x} AS DOUBLE)" if self.widen else x
        return {"s": f"COALESCE(SUM({value} * {w}) FILTER (WHERE isfinite({value})), 0.0)"}

    def finalize(self, new: Refs) -> str:
        finite = f"{new['s']} / {new['n']}" if self.average else new["s"]
        up, down = new["up"], new["down"]
        return (
            f"CASE WHEN {new['n']} = 0 THEN NULL "
            f"WHEN {up} > 0 AND {down} > 0 THEN CAST('nan' AS DOUBLE) "
            f"WHEN {up} > 0 THEN CAST('inf' AS DOUBLE) "
            f"WHEN {down} > 0 THEN CAST('-inf' AS DOUBLE) ELSE {finite} END"
        )


@dataclass(frozen=True)
class Extreme(Running):
    """MIN or MAX: the extreme and a count of its live copies (see the module docstring)."""

    largest: bool = True

    def state(self, arg_type: str) -> Named:
        return (("m", arg_type), ("c", "BIGINT"))

    def partials(self, x: str, w: str) -> Named:
        best, arg = ("MAX", "arg_max") if self.largest else ("MIN", "arg_min")
        return (
            ("ib", f"{best}({x}) FILTER (WHERE {w} > 0)"),  # the best value inserted
            ("ic", f"{arg}({w}, {x}) FILTER (WHERE {w} > 0)"),  # copies of it (one row's)
            ("db", f"{best}({x}) FILTER (WHERE {w} < 0)"),  # the best value deleted
            ("dn", f"-SUM({w}) FILTER (WHERE {w} < 0 AND {x} IS NOT NULL)"),  # copies deleted
            ("in", f"SUM({w}) FILTER (WHERE {w} > 0 AND {x} IS NOT NULL)"),  # copies inserted
        )

    def combine(self, old: Refs, part: Refs, new: Refs) -> dict[str, str]:
        better, best = (">", "GREATEST") if self.largest else ("<", "LEAST")
        m, ib, ic = old["m"], part["ib"], part["ic"]
        # Counted copies of the old extreme left: no deleted value is better than it, and
        # where the best deleted value is it, every deleted copy is counted as one of it.
        deleted = f"CASE WHEN {part['db']} = {m} THEN {part['dn']} ELSE 0 END"
        left = f"(COALESCE({old['c']}, 0) - {deleted})"
        # Else the best inserted value: if at least as good, or if the inserted values are
        # all there is (the group was emptied and refilled). With no value left, ib and m
        # are NULL: so is the result.
        take = f"NOT ({m} {better} {ib}) OR {m} IS NULL OR {new['n']} = {part['in']}"
        return {
            "m": f"CASE WHEN {left} > 0 THEN {best}({m}, {ib}) WHEN {take} THEN {ib} END",
            "c": (
                f"CASE WHEN {left} > 0 THEN (CASE WHEN {ib} = {m} THEN {left} + {ic} "
                f"WHEN {ib} {better} {m} THEN {ic} ELSE {left} END) "
                f"WHEN {take} THEN {ic} ELSE 0 END"
            ),
        }

    def flag(self, new: Refs) -> str:
        return f"({new['n']} > 0 AND {new['m']} IS NULL)"

    def recompute(self, x: str, w: str) -> dict[str, str]:
        best, arg = ("MAX", "arg_max") if self.largest else ("MIN", "arg_min")
        return {
            "m": f"{best}({x}) FILTER (WHERE {w} > 0)",
            "c": f"COALESCE({arg}({w}, {x}) FILTER (WHERE {w} > 0), 0)",
        }

    def finalize(self, new: Refs) -> str:
        return new["m"]


BIGGEST = "1.7976931348623157e308"
"""The largest finite DOUBLE: beyond it, +inf (and NaN, which DuckDB orders above all)."""


def float_sum(average: bool, widen: bool) -> FloatSum:
    """SUM (or AVG) over a DOUBLE argument, or a REAL one (``widen``: summed as DOUBLE)."""
    v = "CAST({x} AS DOUBLE)" if widen else "{x}"
    # NaN counts as both: NaN if any NaN or both infinities, else the infinity present.
    moments = (
        NON_NULL,
        Moment("up", f"CAST({{x}} > {BIGGEST} AS INTEGER)", "BIGINT"),
        Moment("down", f"CAST({{x}} < -{BIGGEST} OR isnan({{x}}) AS INTEGER)", "BIGINT"),
        # Out of the limbs' range, the non-finite values too (their group's value does
        # not depend on the sum while any of them is live).
        Moment("out", f"CAST(NOT {exact_sum.in_range(v)} AS INTEGER)", "BIGINT"),
        *(Moment(f"l{i}", term, "HUGEINT") for i, term in enumerate(exact_sum.limb_terms(v))),
    )
    return FloatSum(moments, average=average, widen=widen)


def extreme(largest: bool) -> Extreme:
    """MAX (or MIN)."""
    return Extreme((NON_NULL,), largest=largest)
