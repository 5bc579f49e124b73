"""The engine's view of storage: where traces live and how a table is named.

The executor asks a ``StateStore`` for table names and never decides them
itself; ``ivm.storage.naming`` is the DuckDB implementation.
"""

from __future__ import annotations

from typing import Protocol


class StateStore(Protocol):
    """Names of the DuckDB tables that hold state and scratch results."""

    def relation_trace(self, name: str) -> str:
        """Quoted table name of the trace of base table or view ``name``."""
        ...

    def operator_trace(self, view: str, index: int) -> str:
        """Quoted table name of the state trace of operator ``index`` of ``view``."""
        ...

    def scratch(self, view: str, index: int, part: str) -> str:
        """Quoted name of a temporary table for one epoch's intermediate result."""
        ...
