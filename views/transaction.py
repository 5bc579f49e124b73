"""One DuckDB transaction around a DDL script or an epoch, with in-memory rollback.

``BEGIN … COMMIT``, or ``ROLLBACK`` on any error; the session's in-memory
catalog (tables, views) is restored too, and actions registered for after the
commit (or after a roll-back) run then: file moves in Spark mode, catalog
registrations. A DuckDB error inside becomes the given ``IvmError`` class (an epoch's,
``ExecutionError``, only when a value is at fault; else ``InternalError``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import duckdb

from ivm import faults
from ivm.errors import ExecutionError, IvmError, StateError
from ivm.execution.failures import duckdb_text, sql_failure


class Transactional(Protocol):
    """What a transaction needs of the session."""

    _con: duckdb.DuckDBPyConnection
    _on_commit: list[Callable[[], None]]
    _on_rollback: list[Callable[[], None]]

    def _snapshot(self) -> Any:
        """The in-memory catalog, to restore after a roll-back."""
        ...

    def _restore(self, saved: Any) -> None:
        """Put back what ``snapshot`` returned."""
        ...

    def _commit_actions_failed(self) -> None:
        """Told when an action run after the commit failed (the commit stands)."""
        ...


def run_all(actions: Iterable[Callable[[], None]]) -> None:
    """Run every action, even if an earlier one fails; then raise the first failure."""
    failures = []
    for action in actions:
        try:
            action()
        except Exception as error:  # noqa: BLE001 - each action must get its turn
            failures.append(error)
    if failures:
        raise failures[0]


class Transaction:
    """BEGIN … COMMIT, or ROLLBACK on any error (and the in-memory catalog restored)."""

    def __init__(self, session: Transactional, error_class: type[IvmError]) -> None:
        self.session = session
        self.error_class = error_class  # what a DuckDB error inside becomes

    def __enter__(self) -> None:
        s = self.session
        self.saved = s._snapshot()
        s._on_commit, s._on_rollback = [], []
        s._con.execute("BEGIN TRANSACTION").fetchall()
        faults.reached("transaction.begun")

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: object
    ) -> None:
        if kind is None:
            self._commit()
            return
        self._roll_back()
        if isinstance(error, OSError):  # the machine's (a full disk), not ivm's
            raise self.error_class(f"writing state failed, nothing was applied: {error}") from error
        if isinstance(error, duckdb.Error):
            if self.error_class is ExecutionError:  # an epoch's statements are ivm's own
                raise sql_failure(error) from error
            raise self.error_class(f"DuckDB: {duckdb_text(error)}") from error

    def _commit(self) -> None:
        """COMMIT, then the after-commit actions. Whatever stops the COMMIT (DuckDB's
        error, a full disk, an interrupt) rolls back: the session is as before, its
        transaction closed. Once it has committed, the actions run whatever comes
        (the session's epoch count is the first), so the session matches its state; a
        failing action leaves the commit standing and is raised."""
        s = self.session
        try:
            faults.reached("commit.before")
            s._con.execute("COMMIT").fetchall()
        except BaseException as commit_error:
            self._roll_back()
            if isinstance(commit_error, duckdb.Error | OSError):
                raise StateError(
                    f"committing failed, nothing was applied: {commit_error}"
                ) from commit_error
            raise
        # The actions go with the transaction: kept on the session, they (and the epoch's
        # arrays they close over) would stay alive until the next transaction began.
        actions, s._on_commit, s._on_rollback = s._on_commit, [], []
        try:
            faults.reached("commit.after")
        finally:
            try:
                run_all(actions)
            except BaseException:
                s._commit_actions_failed()
                raise
        faults.reached("commit.actions")

    def _roll_back(self) -> None:
        """ROLLBACK (none may be open after a failed COMMIT), the in-memory catalog
        restored and the roll-back actions run."""
        s = self.session
        try:
            with contextlib.suppress(duckdb.TransactionException):  # nothing open
                s._con.execute("ROLLBACK").fetchall()
        finally:
            s._restore(self.saved)
            undo, s._on_commit, s._on_rollback = s._on_rollback, [], []
            run_all(reversed(undo))
