"""ivm: incremental view maintenance for SQL, on DuckDB.

``ivm.connect()`` opens a session; see API.md for the whole contract.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ivm.errors import (
    ConstraintError,
    ExecutionError,
    IvmError,
    SchemaError,
    SqlError,
    StateError,
    UnsupportedSQL,
)

if TYPE_CHECKING:
    from views.session import Session

__all__ = [
    "ConstraintError",
    "ExecutionError",
    "IvmError",
    "SchemaError",
    "Session",
    "SqlError",
    "StateError",
    "UnsupportedSQL",
    "connect",
]


def connect(path: str | None = None, **options: Any) -> Session:
    """Open a session: in memory without ``path``, else persistent state under ``path``."""
    from views.session import connect as open_session

    return open_session(path, **options)
