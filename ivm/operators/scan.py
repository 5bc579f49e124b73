"""Scan: a base table or another view, read by name (the circuit's input).

Meaning: every row of relation ``name`` with its multiplicity.

Incremental form (``Source``): its change is the relation's change this epoch,
its integral the relation's own trace (a base table's rows, a view's output):
the source keeps no state of its own. While a new view fills itself
(backfill), the change is the relation's whole contents and the integral empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ivm.operators.base import At, Operator, Run
from ivm.plan.node import Plan
from ivm.plan.sql import column_list
from ivm.schema import Schema, quote


@dataclass(frozen=True, eq=False)
class Scan(Plan):
    """Every row of base table or view ``name``."""

    name: str

    @property
    def source_name(self) -> str:
        return self.name

    def plain(self, inputs: Sequence[str]) -> str:
        return f"SELECT {column_list(self.schema.names)} FROM {quote(self.name)}"

    def describe(self) -> str:
        return f"Scan {self.name}"


@dataclass(frozen=True, eq=False)
class Source(Operator):
    """The change of a base table or view; its integral is that relation's trace."""

    kind = "source"

    @property
    def name(self) -> str:
        """The table or view read."""
        assert isinstance(self.node, Scan)
        return self.node.name

    def change(self, run: Run) -> str | None:
        return run.source_change(self.name, self.schema)

    def integral(self, run: Run) -> str:
        return run.source_integral(self.name, self.schema)

    def integral_at(self, run: Run, at: At) -> str | None:
        """The relation's rows at ``at``'s keys; only the columns the reader uses when it
        says which (an operator above names them: ``At.needed``)."""
        schema = self.schema
        if at.needed is not None:
            kept = set(at.needed) | set(at.columns)
            schema = Schema(tuple(c for c in schema.columns if c.name in kept))
        return run.source_integral(self.name, schema, at)

    def label(self) -> str:
        return f"Source {self.name} (integral: the relation's trace)"
