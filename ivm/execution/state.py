"""The engine's view of storage: where traces live and how a table is named.

The executor asks a ``StateStore`` for table names and never decides them
itself; ``ivm.storage.naming`` is the DuckDB implementation. Operator state is
named by the operator's fingerprint and the trace's role, never by position,
so a trace can only ever be found by the operator that computes what it holds.
"""

from __future__ import annotations

from typing import Protocol


class StateStore(Protocol):
    """Names of the DuckDB tables that hold state and scratch results."""

    def relation_trace(self, name: str) -> str:
        """Quoted table name of the trace of base table or view ``name``."""
        ...

    def operator_trace(self, view: str, operator: str, role: str) -> str:
        """Quoted table name of trace ``role`` of the operator with fingerprint ``operator``
        in ``view``'s circuit."""
        ...

    def scratch(self, view: str, operator: str, part: str) -> str:
        """Quoted name of a temporary table for one epoch's intermediate result."""
        ...
