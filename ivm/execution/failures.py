"""Whose fault a failed statement is: the data's (``ExecutionError``) or ivm's (``InternalError``).

A statement ivm generated fails in DuckDB for one of three reasons:

* a *value* no evaluation can take: a cast that cannot succeed, an overflow, invalid
  input to a function (a malformed date, JSON text or pattern, an integer division by
  zero, ``error()``). DuckDB raises a ``DataError`` (``ConversionException``,
  ``OutOfRangeException``, ``TypeMismatchException``) or an ``InvalidInputException``.
  That is the data's: ``ExecutionError`` (``ivm.views.diagnose`` then names the user's
  expression);
* the *machine*: out of memory, a file that cannot be written, an interrupt. Not a
  bug either: ``ExecutionError``, and nothing is applied;
* anything else (SQL DuckDB cannot parse or bind, a table or function it does not know,
  a feature it has not implemented, its own internal error, a transaction left
  aborted): ivm generated what it should not have. ``InternalError``, naming the view
  and the construct where they are known and asking for a report.

Messages never quote the generated SQL (DuckDB's ``LINE n: …`` excerpt is cut off).
"""

from __future__ import annotations

import re

import duckdb

from ivm.errors import ExecutionError, InternalError, IvmError
from ivm.guard import internal_message
from ivm.operators.base import Operator

DATA_ERRORS: tuple[type[duckdb.Error], ...] = (duckdb.DataError, duckdb.InvalidInputException)
"""DuckDB's exceptions about a value in the data."""

RESOURCE_ERRORS: tuple[type[duckdb.Error], ...] = (
    duckdb.OutOfMemoryException,
    duckdb.IOException,
    duckdb.PermissionException,
    duckdb.InterruptException,
)
"""DuckDB's exceptions about the machine it runs on."""


def _names(classes: tuple[type[BaseException], ...]) -> frozenset[str]:
    found: set[str] = set()
    pending = list(classes)
    while pending:
        cls = pending.pop()
        found.add(cls.__name__)
        pending.extend(cls.__subclasses__())
    return frozenset(found)


NOT_IVMS_FAULT = _names(DATA_ERRORS + RESOURCE_ERRORS) | {"OSError"}
"""The class names of both, every subclass included, and Python's bare ``OSError`` (what a
write to a full disk raises, ``errno.ENOSPC``; its subclasses, a missing file say, may be
ivm's): how a Spark task's failure, which arrives as text, is told apart."""

_GENERATED = re.compile(r"\n\s*\n?\s*LINE \d+:.*", re.DOTALL)

# What each kind of operator maintains, in the user's words.
CONSTRUCTS = {
    "aggregate": "GROUP BY / aggregate",
    "aggregate_per_key": "GROUP BY / aggregate",
    "aggregate_running": "GROUP BY / aggregate",
    "arrange": "index of a join input",
    "asof_join": "ASOF JOIN",
    "difference": "EXCEPT ALL",
    "differentiate": "temporal join",
    "distinct": "DISTINCT (or GROUP BY without aggregates)",
    "distinct_on": "DISTINCT ON / QUALIFY",
    "feedback": "recursive CTE",
    "filter": "WHERE / HAVING",
    "fixed_point": "recursive CTE",
    "guard": "scalar subquery (at most one row)",
    "import": "recursive CTE",
    "integrate": "temporal join",
    "join": "JOIN",
    "locked_join": "temporal join",
    "per_key": "per-key recomputation",
    "project": "SELECT list",
    "set_operation": "UNION / INTERSECT / EXCEPT",
    "source": "table or view read",
    "top_k": "ORDER BY … LIMIT",
    "union_all": "UNION ALL",
    "values": "VALUES list",
    "window": "window function",
}


def duckdb_text(error: BaseException) -> str:
    """DuckDB's message on one line, without the generated SQL it quotes."""
    return " ".join(_GENERATED.sub("", str(error)).split())


def is_data_error(error: BaseException) -> bool:
    """Whether DuckDB's ``error`` is about a value in the data (or the machine), not ivm."""
    return isinstance(error, DATA_ERRORS + RESOURCE_ERRORS)


def construct_of(op: Operator) -> str:
    """The construct ``op`` maintains, in the user's words and as ``explain`` shows it."""
    label = op.label()
    if len(label) > 160:
        label = label[:157] + "…"
    return f"{CONSTRUCTS.get(op.kind, op.kind)} ({label})"


def sql_failure(
    error: duckdb.Error, view: str = "", construct: str = "", doing: str = "evaluating a view"
) -> IvmError:
    """The error a failed generated statement stands for: ``ExecutionError`` when DuckDB
    objects to a value (or the machine), else ``InternalError``."""
    if is_data_error(error):
        return ExecutionError(f"{doing} failed: {duckdb_text(error)}")
    return InternalError(internal_message(duckdb_text(error), view, construct))


def in_view(error: InternalError, view: str) -> InternalError:
    """``error`` naming ``view`` (a new error with the same cause; raise it without
    ``from``). An error that names a view already keeps its text."""
    text = str(error)
    named = InternalError(text if text.startswith("view ") else f"view {view!r}: {text}")
    named.__cause__ = error.__cause__ or error
    return named
