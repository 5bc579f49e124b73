"""Names of the DuckDB tables that hold ivm's state (implements the engine's
``ivm.execution.state.StateStore`` protocol).

User-chosen names only ever appear inside quoted identifiers.
"""

from __future__ import annotations

from ivm.storage.sqltext import quote, unquote

PREFIX = "__ivm_"
FINGERPRINT_CHARS = 16
"""Hex digits of an operator's fingerprint kept in a table name (64 bits)."""


class TableNames:
    """Where each trace and scratch result lives in one DuckDB database."""

    def relation_trace(self, name: str) -> str:
        """Trace of a base table or a view's output: its rows and weights."""
        return quote(f"{PREFIX}rel_{name}")

    def operator_trace(self, view: str, operator: str, role: str) -> str:
        """Trace ``role`` of the operator with fingerprint ``operator`` in a view's circuit."""
        return quote(f"{PREFIX}op_{view}#{role}-{operator[:FINGERPRINT_CHARS]}")

    def scratch(self, view: str, operator: str, part: str) -> str:
        """A temporary table for one epoch's intermediate result."""
        return quote(f"{PREFIX}tmp_{view}#{operator[:FINGERPRINT_CHARS]}_{part}")

    def describe(self, table: str) -> str:
        """What a trace table holds, in a user's words (for ``explain``)."""
        name = unquote(table)
        if name.startswith(f"{PREFIX}rel_"):
            return f"the rows of {name[len(PREFIX) + 4:]!r}"
        if name.startswith(f"{PREFIX}op_"):
            view, _, rest = name[len(PREFIX) + 3:].rpartition("#")
            role, _, operator = rest.rpartition("-")
            return f"{view!r}'s {role} state (operator {operator[:8]})"
        return name

    def change(self, name: str) -> str:
        """A temporary table holding this epoch's change of a table or view."""
        return quote(f"{PREFIX}chg_{name}")
