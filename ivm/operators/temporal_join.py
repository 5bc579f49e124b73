"""Processing-time temporal join: ``JOIN r FOR SYSTEM_TIME AS OF PROCTIME()`` (Flink's).

Meaning: each left row joins ``r`` as ``r`` was when the row *arrived* (at the end of
the epoch that inserted it, that epoch's changes to ``r`` included; rows already there
when the view is created arrive then), and keeps that output forever: later changes
to ``r`` never change it (the *lock-in*). ``outer`` (LEFT JOIN): a row without a match
at arrival keeps its NULLs. A departing left row takes back exactly what it produced,
whatever ``r`` is now. An update (delete and insert of a key in one epoch) is a new
arrival; an identical row deleted and inserted in one epoch is no change (a batch is a
consolidated Z-set), so it keeps its arrival. Of several identical copies of a left row
(a table without a key), a delete takes back the most recent arrivals first (last in,
first out).

As in the differential-dataflow seed, the circuit is ``Integrate ∘ LockedJoin ∘
Differentiate``: ``Differentiate`` makes the left input's changes the collection
itself (each epoch's arrivals and departures), ``LockedJoin`` joins the arrivals with
``r`` now and pairs each departure with its own locked-in output, and ``Integrate``
sums those per-epoch outputs into the view. The plain differentiate → join →
integrate would join a departure with the *current* ``r`` and take back what the row
never produced; ``LockedJoin`` instead keeps, per left row and arrival epoch, the
copies that arrived (trace ``arrivals``) and what they produced (trace ``locked``).
Changes to ``r`` alone produce nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from ivm.operators.base import At, Operator, Run, TraceSpec
from ivm.operators.join import conjuncts
from ivm.plan.node import Plan
from ivm.plan.sql import W, column_list, null_safe_match, sql_of, union_all_sql
from ivm.schema import Column, Schema, quote

ARRIVAL = "__ivm_arrival"
ARRIVALS = "arrivals"
LOCKED = "locked"


@dataclass(frozen=True, eq=False)
class Differentiate(Plan):
    """The changes of ``input``, each epoch's as a collection (arrivals and departures)."""

    input: Plan

    def plain(self, inputs: Sequence[str]) -> str:
        return inputs[0]  # typing only: its rows are the input's

    def describe(self) -> str:
        return "Differentiate (each epoch's changes: arrivals +, departures −)"


@dataclass(frozen=True, eq=False)
class Integrate(Plan):
    """The sum over epochs of ``input``'s per-epoch collections."""

    input: Plan

    def plain(self, inputs: Sequence[str]) -> str:
        return inputs[0]

    def describe(self) -> str:
        return "Integrate (the per-epoch outputs summed into the view)"


@dataclass(frozen=True, eq=False)
class TemporalJoin(Plan):
    """``left`` (a ``Differentiate``) [LEFT] JOIN ``right`` FOR SYSTEM_TIME AS OF PROCTIME()
    ON ``condition``: columns are the left's, then the right's."""

    left: Plan
    right: Plan
    condition: exp.Expression | None
    outer: bool

    def plain(self, inputs: Sequence[str]) -> str:
        # Typing only: the contents depend on when rows arrived, which no query can see.
        kind = "LEFT JOIN" if self.outer else "JOIN"
        on = sql_of(self.condition) if self.condition is not None else "true"
        return f"SELECT * FROM ({inputs[0]}) AS __l {kind} ({inputs[1]}) AS __r ON {on}"

    def describe(self) -> str:
        kind = "LEFT JOIN" if self.outer else "JOIN"
        on = sql_of(self.condition) if self.condition is not None else "true"
        return f"LockedJoin {kind} FOR SYSTEM_TIME AS OF PROCTIME() ON {on}"

    def equi_keys(self) -> list[tuple[str, str]]:
        """(left column, right column) pairs the condition equates."""
        lefts, rights = set(self.left.schema.names), set(self.right.schema.names)
        pairs = []
        for term in conjuncts(self.condition):
            if isinstance(term, exp.EQ) and all(
                isinstance(s, exp.Column) for s in (term.left, term.right)
            ):
                a, b = term.left.name, term.right.name
                if a in lefts and b in rights:
                    pairs.append((a, b))
                elif b in lefts and a in rights:
                    pairs.append((b, a))
        return pairs


@dataclass(frozen=True, eq=False)
class _PassOn(Operator):
    """A linear operator whose change is its input's, as it is."""

    linear = True

    def linear_sql(self, inputs: Sequence[str | None]) -> str | None:
        return inputs[0]

    def column_origin(self, column: str) -> str | None:
        return column


@dataclass(frozen=True, eq=False)
class DifferentiateOperator(_PassOn):
    """Passes the input's change on as this epoch's collection (linear, no state)."""

    kind = "differentiate"


@dataclass(frozen=True, eq=False)
class IntegrateOperator(_PassOn):
    """Sums its input's per-epoch collections: in change terms, passes them on."""

    kind = "integrate"


@dataclass(frozen=True, eq=False)
class LockedJoin(Operator):
    """Arrivals join ``r`` now; departures take back what they locked in (module doc)."""

    kind = "locked_join"

    @property
    def join(self) -> TemporalJoin:
        """The plan node."""
        assert isinstance(self.node, TemporalJoin)
        return self.node

    def traces(self) -> tuple[TraceSpec, ...]:
        left = self.join.left.schema
        arrival = Column(ARRIVAL, "BIGINT")
        keyed = tuple(a for a, _ in self.join.equi_keys()) or tuple(left.names)
        return (
            TraceSpec(ARRIVALS, Schema((*left.columns, arrival)), keyed),
            TraceSpec(LOCKED, Schema((*self.schema.columns, arrival)), keyed),
        )

    def input_keys(self) -> tuple[tuple[str, ...] | None, ...]:
        pairs = self.join.equi_keys()
        return tuple(a for a, _ in pairs), tuple(b for _, b in pairs)

    def output_key(self) -> tuple[str, ...] | None:
        return None  # copies of one output row may come from left rows of several keys

    def reads_integrals(self) -> tuple[bool, ...]:
        return (False, True)

    def label(self) -> str:
        return (
            f"{self.join.describe()} (arrivals join r now; departures take back their own "
            "output; state: arrivals and their locked-in output, by left row)"
        )

    def integral(self, run: Run) -> str:
        return run.read(self, LOCKED)

    def change(self, run: Run) -> str | None:
        change = run.change(self.inputs[0])
        if change is None:
            return None  # a change of r alone changes nothing: outputs are locked in
        node = self.join
        lnames, names = node.left.schema.names, self.schema.names
        delta = run.materialize(self, "delta", (
            f"SELECT {column_list(lnames)}, SUM({W})::BIGINT AS {W} FROM ({change}) AS __c "
            f"GROUP BY ALL HAVING SUM({W}) <> 0"
        ))
        if run.is_empty(delta):
            return None
        right = run.integral(self.inputs[1])
        right_change = run.change(self.inputs[1])
        if right_change is not None:
            right = union_all_sql([right, right_change])
        rnames = node.right.schema.names
        pairs = node.equi_keys()
        if pairs:  # only the right rows the arrivals' keys can match
            keys = ", ".join(f"{quote(a)}" for a, _ in pairs)
            same = " AND ".join(f"__r.{quote(b)} = __k.{quote(a)}" for a, b in pairs)
            right = (
                f"SELECT * FROM ({right}) AS __r SEMI JOIN (SELECT DISTINCT {keys} FROM "
                f"({delta}) AS __d WHERE {W} > 0) AS __k ON {same}"
            )
        live_right = (
            f"SELECT {column_list(rnames)}, SUM({W}) AS {W} FROM ({right}) AS __r "
            f"GROUP BY ALL HAVING SUM({W}) > 0"
        )
        kind = "LEFT JOIN" if node.outer else "JOIN"
        on = sql_of(node.condition) if node.condition is not None else "true"
        weight = f"__l.{W} * COALESCE(__r.{W}, 1)"
        epoch = int(run.epoch)
        new = run.materialize(self, "new", (
            f"SELECT {column_list(lnames, '__l')}, {column_list(rnames, '__r')}, "
            f"{epoch}::BIGINT AS {ARRIVAL}, ({weight})::BIGINT AS {W} "
            f"FROM (SELECT * FROM ({delta}) AS __d WHERE {W} > 0) AS __l "
            f"{kind} ({live_right}) AS __r ON {on}"
        ))
        leaving = f"SELECT {column_list(lnames)} FROM ({delta}) AS __y WHERE {W} < 0"
        arrivals = run.read(self, ARRIVALS, At(tuple(lnames), leaving))
        taken = run.materialize(self, "taken", _taken_sql(lnames, delta, arrivals))
        locked = run.read(self, LOCKED, At(tuple(lnames), f"SELECT {column_list(lnames)} "
                                                          f"FROM ({taken}) AS __s"))
        gone = run.materialize(self, "gone", (
            f"SELECT {column_list(names, '__o')}, __o.{ARRIVAL}, "
            f"(-__o.{W} * __t.__ivm_taken // __t.__ivm_copies)::BIGINT AS {W} "
            f"FROM (SELECT {column_list(names)}, {ARRIVAL}, SUM({W}) AS {W} FROM ({locked}) "
            f"AS __k GROUP BY ALL HAVING SUM({W}) <> 0) AS __o "
            f"JOIN ({taken}) AS __t ON {null_safe_match(lnames, '__o', '__t')} "
            f"AND __o.{ARRIVAL} = __t.{ARRIVAL}"
        ))
        run.append(self, LOCKED, union_all_sql([new, gone]))
        run.append(self, ARRIVALS, union_all_sql([
            f"SELECT {column_list(lnames)}, {epoch}::BIGINT AS {ARRIVAL}, {W} FROM ({delta}) "
            f"AS __d WHERE {W} > 0",
            f"SELECT {column_list(lnames)}, {ARRIVAL}, -__ivm_taken AS {W} FROM ({taken})",
        ]))
        return (
            f"SELECT {column_list(names)}, {W} FROM ({new}) AS __n UNION ALL "
            f"SELECT {column_list(names)}, {W} FROM ({gone}) AS __g"
        )


def _taken_sql(names: Sequence[str], delta: str, arrivals: str) -> str:
    """Per departing left row and arrival epoch: the copies that arrived then
    (``__ivm_copies``) and how many of them depart now (``__ivm_taken``), the most recent
    arrivals first. ``arrivals``: the arrivals trace's rows at (at least) the departing
    rows."""
    cols = column_list(names)
    return f"""
SELECT {cols}, {ARRIVAL}, __ivm_copies,
  LEAST(__ivm_copies, GREATEST(0, __ivm_leaving - (__ivm_through - __ivm_copies)))
    AS __ivm_taken
FROM (
  SELECT {column_list(names, '__a')}, __a.{ARRIVAL}, __a.__ivm_copies, -__d.{W} AS __ivm_leaving,
    SUM(__a.__ivm_copies) OVER (PARTITION BY {column_list(names, '__a')}
      ORDER BY __a.{ARRIVAL} DESC ROWS UNBOUNDED PRECEDING) AS __ivm_through
  FROM (SELECT {cols}, {ARRIVAL}, SUM({W}) AS __ivm_copies FROM ({arrivals}) AS __x
        GROUP BY ALL HAVING SUM({W}) > 0) AS __a
  JOIN ({delta}) AS __d ON {null_safe_match(names, '__a', '__d')} AND __d.{W} < 0
) AS __ranked
WHERE LEAST(__ivm_copies, GREATEST(0, __ivm_leaving - (__ivm_through - __ivm_copies))) > 0"""
