"""INTERSECT [ALL] and EXCEPT [ALL]: set operations by weight transitions.

Meaning, for a row r with multiplicity a in the left input and b in the right
(both inputs have the output's columns; rows compare null-safely, NULL = NULL):

* ``INTERSECT ALL``: r with weight min(a, b);
* ``EXCEPT ALL``:    r with weight max(a − b, 0);
* ``INTERSECT``:     r with weight 1 when a > 0 and b > 0;
* ``EXCEPT``:        r with weight 1 when a > 0 and b = 0.

Each is a per-row *multiplicity function* f(a, b) of the inputs' weights.
DISTINCT is the one-input case, f(a) = [a > 0]: ``ivm.operators.distinct`` uses
the same mechanism (``multiplicity_change_sql``).

State: a trace of each input (rows and weights), keyed and partitioned by the
whole row (so a partitioned executor co-locates equal rows of both inputs).
Per epoch, for the rows either input's change touches (and only those; the
traces are read at those rows alone), with old weights a, b from the traces and
consolidated changes δa, δb, the output changes by f(a+δa, b+δb) − f(a, b):
only rows whose output multiplicity moves produce output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ivm.operators.base import At, Operator, Run, TraceSpec
from ivm.plan.node import Plan
from ivm.plan.sql import W, column_list, null_safe_match
from ivm.schema import quote

Multiplicity = Callable[[Sequence[str]], str]
"""SQL of a row's output weight given SQL of its weight in each input."""

MULTIPLICITIES: dict[str, Multiplicity] = {
    "INTERSECT ALL": lambda w: f"GREATEST(LEAST({w[0]}, {w[1]}), 0)",
    "EXCEPT ALL": lambda w: f"GREATEST({w[0]} - {w[1]}, 0)",
    "INTERSECT": lambda w: f"CASE WHEN {w[0]} > 0 AND {w[1]} > 0 THEN 1 ELSE 0 END",
    "EXCEPT": lambda w: f"CASE WHEN {w[0]} > 0 AND {w[1]} <= 0 THEN 1 ELSE 0 END",
}
"""The set operations and their multiplicity functions f(a, b)."""

ROLES = ("left", "right")
DELTAS = ("__ivm_d0", "__ivm_d1")
"""Columns of the touched rows holding each input's consolidated change."""


@dataclass(frozen=True, eq=False)
class SetOperation(Plan):
    """``left`` INTERSECT / EXCEPT [ALL] ``right`` (``operation`` names which); both
    inputs have the output's column names and types."""

    left: Plan
    right: Plan
    operation: str

    def __post_init__(self) -> None:
        if self.operation not in MULTIPLICITIES:
            raise ValueError(f"unknown set operation {self.operation!r}")

    def plain(self, inputs: Sequence[str]) -> str:
        left, right = inputs
        return f"SELECT * FROM ({left}) AS __l {self.operation} SELECT * FROM ({right}) AS __r"

    def describe(self) -> str:
        return f"SetOperation {self.operation}"


@dataclass(frozen=True, eq=False)
class IncrementalSetOperation(Operator):
    """INTERSECT / EXCEPT [ALL]: a trace of each input; output where f(a, b) moves."""

    kind = "set_operation"

    @property
    def operation(self) -> str:
        """INTERSECT, INTERSECT ALL, EXCEPT or EXCEPT ALL."""
        assert isinstance(self.node, SetOperation)
        return self.node.operation

    def traces(self) -> tuple[TraceSpec, ...]:
        names = tuple(self.schema.names)
        return tuple(TraceSpec(role, self.schema, names) for role in ROLES)

    def input_keys(self) -> tuple[tuple[str, ...] | None, ...]:
        return tuple(tuple(i.schema.names) for i in self.inputs)

    def change(self, run: Run) -> str | None:
        changes = [run.change(i) for i in self.inputs]
        if all(c is None for c in changes):
            return None
        names = self.schema.names
        cols = column_list(names)
        parts = []
        for side, (op, change) in enumerate(zip(self.inputs, changes, strict=True)):
            if change is None:
                continue
            renamed = ", ".join(
                f"{quote(i)} AS {quote(o)}" for i, o in zip(op.schema.names, names, strict=True)
            )
            weights = ", ".join(f"{W if d == side else '0'}::BIGINT AS {c}"
                                for d, c in enumerate(DELTAS))
            parts.append(f"SELECT {renamed}, {weights} FROM ({change}) AS __c{side}")
        sums = ", ".join(f"SUM({c})::BIGINT AS {c}" for c in DELTAS)
        nonzero = " OR ".join(f"SUM({c}) <> 0" for c in DELTAS)
        touched = run.materialize(
            self, "touched",
            f"SELECT {cols}, {sums} FROM ({' UNION ALL '.join(parts)}) AS __t "
            f"GROUP BY {cols} HAVING {nonzero}",
        )
        at = At(tuple(names), f"SELECT {cols} FROM ({touched}) AS __t")
        olds = [run.read(self, role, at, live=True) for role in ROLES]
        for side, (change, role) in enumerate(zip(changes, ROLES, strict=True)):
            if change is not None:
                d = DELTAS[side]
                run.append(self, role, f"SELECT {cols}, {d} AS {W} FROM ({touched}) AS __t "
                                       f"WHERE {d} <> 0")
        step = multiplicity_change_sql(names, touched, DELTAS, olds,
                                       MULTIPLICITIES[self.operation])
        return run.materialize(self, "output", step)

    def integral(self, run: Run) -> str:
        names = self.schema.names
        cols = column_list(names)
        sides = " UNION ALL ".join(
            f"SELECT {cols}, "
            + ", ".join(f"{W if d == side else '0'}::BIGINT AS {c}" for d, c in enumerate(DELTAS))
            + f" FROM ({run.read(self, role)}) AS __r{side}"
            for side, role in enumerate(ROLES)
        )
        weight = MULTIPLICITIES[self.operation](DELTAS)
        sums = ", ".join(f"SUM({c}) AS {c}" for c in DELTAS)
        return (
            f"SELECT {cols}, ({weight})::BIGINT AS {W} FROM (SELECT {cols}, {sums} "
            f"FROM ({sides}) AS __s GROUP BY {cols}) AS __g WHERE ({weight}) > 0"
        )

    def label(self) -> str:
        return (
            f"IncrementalSetOperation {self.operation} "
            "(state: both inputs' traces by whole row)"
        )


def multiplicity_change_sql(
    names: Sequence[str],
    touched: str,
    deltas: Sequence[str],
    olds: Sequence[str],
    multiplicity: Multiplicity,
) -> str:
    """The output change f(new weights) − f(old weights) at the touched rows.

    ``touched``: consolidated rows (columns ``names``) with, in column ``deltas[i]``, the
    change of input i's weight; ``olds[i]``: input i's live rows before the epoch (each
    once, with its weight), at least at the touched rows. Rows whose output weight does
    not move are dropped.
    """
    cols = column_list(names)
    joins, old, new = [], [], []
    for i, (delta, weights) in enumerate(zip(deltas, olds, strict=True)):
        joins.append(f"LEFT JOIN ({weights}) AS o{i} ON {null_safe_match(names, 'd', f'o{i}')}")
        old.append(f"COALESCE(o{i}.{W}, 0)")
        new.append(f"(COALESCE(o{i}.{W}, 0) + d.{delta})")
    change = f"({multiplicity(new)}) - ({multiplicity(old)})"
    return (
        f"SELECT {cols}, {W} FROM (SELECT {column_list(names, 'd')}, ({change})::BIGINT AS {W} "
        f"FROM ({touched}) AS d {' '.join(joins)}) AS c WHERE {W} <> 0"
    )
