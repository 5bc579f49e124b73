"""The logical plan: relational algebra over bags, with a schema on every node.

The SQL front end builds these nodes; ``ivm.incrementalize`` turns them into an
incremental circuit. Nodes are immutable and compared by identity, so a plan is
a DAG: a CTE used twice is one node with two parents.

Column references inside scalar expressions are sqlglot ``Column`` nodes naming
a column of the node's input by its (unique) name; the executor renders them to
DuckDB SQL. There is no second expression language.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sqlglot import exp

from ivm.schema import Schema

INVERTIBLE_AGGREGATES = frozenset({"count_star", "count", "sum", "avg"})
"""Aggregates whose new value follows from the old value and the change alone."""


@dataclass(frozen=True, eq=False)
class Plan:
    """Base class of plan nodes. ``schema`` names and types the output columns."""

    schema: Schema

    @property
    def inputs(self) -> tuple[Plan, ...]:
        """The nodes this node reads."""
        return ()

    def walk(self) -> Iterator[Plan]:
        """Every node of the DAG below and including this one, each once, inputs first."""
        seen: set[int] = set()

        def visit(node: Plan) -> Iterator[Plan]:
            if id(node) in seen:
                return
            seen.add(id(node))
            for child in node.inputs:
                yield from visit(child)
            yield node

        yield from visit(self)

    def sources(self) -> frozenset[str]:
        """Names of the base tables and views this plan reads."""
        return frozenset(n.name for n in self.walk() if isinstance(n, Scan))


@dataclass(frozen=True, eq=False)
class Scan(Plan):
    """Every row of a base table or of another view."""

    name: str


@dataclass(frozen=True, eq=False)
class Filter(Plan):
    """Rows of ``input`` for which ``predicate`` is true (not NULL, not false)."""

    input: Plan
    predicate: exp.Expression

    @property
    def inputs(self) -> tuple[Plan, ...]:
        return (self.input,)


@dataclass(frozen=True, eq=False)
class Project(Plan):
    """One output row per input row: ``exprs`` are (output name, expression) pairs."""

    input: Plan
    exprs: tuple[tuple[str, exp.Expression], ...]

    @property
    def inputs(self) -> tuple[Plan, ...]:
        return (self.input,)


@dataclass(frozen=True, eq=False)
class Join(Plan):
    """Inner join of any number of inputs on ``condition`` (None: cross product).

    Input column names are unique across inputs; the output is their concatenation.
    """

    relations: tuple[Plan, ...]
    condition: exp.Expression | None

    @property
    def inputs(self) -> tuple[Plan, ...]:
        return self.relations


@dataclass(frozen=True)
class AggregateCall:
    """One aggregate: ``func`` over input column ``arg`` (None for COUNT(*)), named ``name``."""

    name: str
    func: str
    arg: str | None

    @property
    def invertible(self) -> bool:
        """True when the aggregate can be updated from a change without the group's rows."""
        return self.func in INVERTIBLE_AGGREGATES


@dataclass(frozen=True, eq=False)
class Aggregate(Plan):
    """GROUP BY ``keys`` (input column names) computing ``calls``.

    With no keys this is a global aggregate: exactly one output row, even over an
    empty input. Output columns: the keys, then one column per call.
    """

    input: Plan
    keys: tuple[str, ...]
    calls: tuple[AggregateCall, ...]

    @property
    def inputs(self) -> tuple[Plan, ...]:
        return (self.input,)


@dataclass(frozen=True, eq=False)
class Distinct(Plan):
    """Each distinct row of ``input`` once."""

    input: Plan

    @property
    def inputs(self) -> tuple[Plan, ...]:
        return (self.input,)


@dataclass(frozen=True, eq=False)
class UnionAll(Plan):
    """The rows of every input (same column count; named after the first input)."""

    parts: tuple[Plan, ...]

    @property
    def inputs(self) -> tuple[Plan, ...]:
        return self.parts
