"""The error classes of the public API. Every error ivm raises derives from IvmError."""

from __future__ import annotations

import re

LONGEST_WORD = 200
"""A message's words (names, values) longer than this are shown cut, with their length."""


def _elided(word: re.Match[str]) -> str:
    text = word[0]
    return f"{text[:60]}…({len(text)} characters)…{text[-20:]}"


class IvmError(Exception):
    """Base class of every error ivm raises.

    A message quotes the user's names and values; one of a megabyte is shown cut (its
    start, its length and its end), so that a message stays readable.
    """

    def __init__(self, *args: object) -> None:
        if args and isinstance(args[0], str) and len(args[0]) > LONGEST_WORD:
            args = (re.sub(rf"\S{{{LONGEST_WORD + 1},}}", _elided, args[0]), *args[1:])
        super().__init__(*args)


class SqlError(IvmError):
    """SQL text that cannot be parsed, or refers to tables or columns that do not exist."""


class UnsupportedSQL(IvmError):
    """SQL that parses but uses a construct ivm cannot maintain incrementally (yet).

    The message names the construct and, where known, its position in the text.
    """


class SchemaError(IvmError):
    """A batch whose columns or types do not fit its table."""


class ConstraintError(IvmError):
    """A batch that breaks a table constraint: deletes a row that is not there,
    inserts a duplicate primary key, or puts NULL in a key or NOT NULL column."""


class StateError(IvmError):
    """Stored state that cannot be used (missing, corrupt, or from another version)."""


class ExecutionError(IvmError):
    """Evaluating a view failed on the data of a batch (e.g. a cast that cannot succeed,
    an overflow, invalid input to a function), or the machine failed it (a file that
    cannot be written; running out of memory is its subclass ``ResourceError``).

    Raised by ``ingest`` (and by creating a view over existing rows); like every ingest
    error it leaves tables and views unchanged. SQL of ivm's own that DuckDB cannot parse
    or bind is never this: it is an ``InternalError``.
    """


class ResourceError(ExecutionError):
    """An epoch, a load or a view's creation needed more memory than the session may use
    (``ivm.connect(..., memory_limit=...)``, ``Session.memory_limit``).

    The message says what ran out, how much the session may use and which table or view
    was being processed. Like every ingest error nothing is applied: tables, views and the
    epoch are as before, and the session stays usable (a smaller batch, or a higher
    limit, then applies as usual). In Spark mode it is also what a partition's task
    running out of memory becomes on the driver.
    """


class InternalError(IvmError):
    """ivm failed on its own, not on the data or the SQL it was given: SQL it generated that
    DuckDB cannot parse or bind, or an unexpected exception anywhere inside ivm.

    A bug in ivm: the message says so, names the view and the construct where they are
    known, and asks for a report; the original exception is chained (``__cause__``).
    Raised inside an ``ingest`` or a DDL script, it leaves tables and views unchanged (the
    transaction is rolled back), and the session stays usable.
    """


class IterationLimitError(ExecutionError):
    """A recursive view did not reach its fixed point within the session's iteration limit
    (``Session.iteration_limit``); the batch (or the view's creation) was rejected whole."""


class EpochError(IvmError):
    """``ingest(..., epoch=N)`` with an N that cannot be applied: not the next epoch nor
    one applied already (a gap), or not a positive integer."""


class IvmWarning(UserWarning):
    """Something ivm did that a user should know of, though nothing failed: e.g. a view's
    stored state was computed for another plan (an upgrade) and was rebuilt from its inputs."""
