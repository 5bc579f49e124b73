"""ivm: incremental view maintenance for SQL, on DuckDB.

``ivm.connect()`` opens a session; see API.md for the whole contract. Everything
ivm installs lives under this one name: the engine (``ivm.plan``, ``ivm.circuit``,
``ivm.operators``, ``ivm.passes``, ``ivm.execution``), ``ivm.sql_frontend``,
``ivm.storage`` and ``ivm.views`` (the session users hold).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ivm.errors import (
    ConstraintError,
    EpochError,
    ExecutionError,
    InternalError,
    IterationLimitError,
    IvmError,
    IvmWarning,
    ResourceError,
    SchemaError,
    SqlError,
    StateError,
    UnsupportedSQL,
)
from ivm.guard import guarded

if TYPE_CHECKING:
    from ivm.views.session import Session

__all__ = [
    "ConstraintError",
    "EpochError",
    "ExecutionError",
    "InternalError",
    "IterationLimitError",
    "IvmError",
    "IvmWarning",
    "ResourceError",
    "SchemaError",
    "Session",
    "SqlError",
    "StateError",
    "UnsupportedSQL",
    "connect",
]


@guarded
def connect(
    path: str | os.PathLike[str] | None = None,
    *,
    spark: Any = None,
    partitions: int | None = None,
    on_plan_change: str = "rebuild",
    iteration_limit: int | None = None,
    settings: Mapping[str, str] | None = None,
    memory_limit: int | str | None = None,
) -> Session:
    """Open a session: in memory without ``path``, else persistent state under ``path``
    (``ivm.views.connecting.connect`` says what each option does)."""
    from ivm.views.connecting import connect as open_session

    return open_session(
        path, spark=spark, partitions=partitions, on_plan_change=on_plan_change,
        iteration_limit=iteration_limit, settings=settings, memory_limit=memory_limit,
    )


def __getattr__(name: str) -> Any:
    # The session class loads on first use, so ``import ivm`` stays light.
    if name == "Session":
        from ivm.views.session import Session

        return Session
    raise AttributeError(f"module 'ivm' has no attribute {name!r}")
