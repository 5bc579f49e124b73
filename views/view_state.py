"""The state of each view: checked against its manifest when reopened, rebuilt, explained.

How a view's state is built, dropped and listed in its manifest is the engine's
(``views.embedded``; Spark mode: ``views.spark.engine``); the catalog stores the
manifest with the state.

Reopening plans every view again from its SQL and compares manifests before
any state is read. Equal: the traces must all be there as listed (else the
state is damaged: ``StateError``). Different (an upgrade changed the plan, or
the state predates manifests): the view is rebuilt from its inputs with an
``IvmWarning``, or, with ``on_plan_change="refuse"``, refused with a
``StateError`` naming the view. Old state is never attached to an operator
that did not write it.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import duckdb

from ivm.errors import (
    IvmError,
    IvmWarning,
    StateError,
)
from ivm.execution.embedded import EpochRunner, create_traces
from ivm.schema import Schema, quote
from ivm.storage.catalog import CatalogError
from ivm.storage.sqltext import unquote
from ivm.views.diagnose import EXISTING, ViewFailed, explain_failure, explain_internal
from ivm.views.resources import as_resource, view_subject

if TYPE_CHECKING:
    from ivm.views.session import Session

    _Base = Session
else:
    _Base = object


def columns_of(schema: Schema) -> tuple[tuple[str, str], ...]:
    """(name, type) of each column."""
    return tuple((c.name, c.type) for c in schema.columns)


class ViewState(_Base):
    """The view-state half of ``Session`` (see the module docstring)."""

    # -- reopening ---------------------------------------------------------------------------

    def _load_view(self, name: str, sql: str) -> None:
        """Plan a stored view again and check its state against its manifest; a view whose
        state was computed for another plan is refused or queued for ``_rebuild_pending``."""
        try:
            view = self._register_view(name, sql)
        except IvmError as error:
            raise StateError(f"stored view {name!r} cannot be planned: {error}") from error
        try:
            stored = self._catalog.manifest(name)
        except CatalogError as error:
            raise StateError(f"state at {self.path} is damaged: {error}") from error
        expected = self._engine.manifest(view)
        if stored == expected:
            self._engine.check_state(view, expected)
            return
        if stored is not None:
            why = "; ".join(stored.differences(expected))
        else:
            why = "the state has no manifest: an older ivm wrote it"
        if self.on_plan_change == "refuse":
            raise StateError(
                f"view {name!r}: its stored state was computed for another plan ({why}); "
                "reopen with ivm.connect(path, on_plan_change='rebuild') to rebuild it from its "
                "inputs"
            )
        self._pending_rebuilds.append((view, stored, why))

    def _rebuild_pending(self) -> None:
        """Rebuild, from their inputs, the views ``_load_view`` found computed for another plan
        (in creation order, so a view's inputs are rebuilt before it)."""
        pending, self._pending_rebuilds = self._pending_rebuilds, []
        for view, stored, why in pending:
            warnings.warn(
                f"ivm: rebuilding view {view.name!r} from its inputs: its stored state was "
                f"computed for another plan ({why})",
                IvmWarning,
                stacklevel=4,
            )
            try:
                with self._transaction(StateError):
                    self._engine.drop_view_state(view.name, stored)
                    self._engine.build_view_state(view, rebuild=True)
            except ViewFailed as failure:
                if failure.internal is not None:
                    raise self._explain_backfill(failure) from failure.error
                raise StateError(
                    f"view {view.name!r} cannot be rebuilt from its inputs: {failure}"
                ) from failure.error

    def _explain_backfill(self, failure: ViewFailed) -> IvmError:
        """A new view's failure over existing rows in the user's terms (in a throwaway
        transaction: the failed one is unusable): the expression a value failed in, or,
        for SQL of ivm's own, the construct it was for; a view that ran out of memory,
        a ResourceError."""
        resource = as_resource(failure.error, view_subject(failure.view.name, True), self._budget)
        if resource is not None:
            return resource
        internal = failure.internal
        self._con.execute("BEGIN TRANSACTION").fetchall()
        try:
            runner = EpochRunner(
                self._con, self._names, {}, backfill=True, iteration_limit=self.iteration_limit,
                epoch=self._catalog.epoch,
            )
            view = failure.view
            if internal is not None:
                create_traces(self._con, self._names, view.circuit)  # what its SQL reads
                return explain_internal(
                    self._con, view.name, view.circuit, runner.change, internal
                )
            return explain_failure(
                self._con, view.name, view.circuit, runner.change, failure.error, EXISTING
            )
        except (duckdb.Error, IvmError):
            return internal or failure
        finally:
            self._con.execute("ROLLBACK").fetchall()

    def _check_tables_present(self) -> None:
        """Every base table's trace must exist, or the state is unusable."""
        present = self._table_columns()
        missing = [
            self._names.relation_trace(n)
            for n in self._tables
            if unquote(self._names.relation_trace(n)) not in present
        ]
        if missing:
            raise StateError(f"state at {self.path} is missing trace table(s) {', '.join(missing)}")

    def _table_columns(self) -> dict[str, tuple[tuple[str, str], ...]]:
        rows = self._con.execute(
            "SELECT table_name, column_name, data_type FROM duckdb_columns() "
            "WHERE database_name = current_database() ORDER BY table_name, column_index"
        ).fetchall()
        found: dict[str, list[tuple[str, str]]] = {}
        for table, column, type_ in rows:
            if column != "__w":
                found.setdefault(table, []).append((column, type_))
        return {t: tuple(c) for t, c in found.items()}

    # -- dropping ---------------------------------------------------------------------------

    def _drop_table_state(self, name: str) -> None:
        """Drop a base table's reader and trace."""
        self._con.execute(f"DROP VIEW IF EXISTS {quote(name)}").fetchall()
        trace = self._names.relation_trace(name)
        self._con.execute(f"DROP TABLE IF EXISTS {trace}").fetchall()
        self._compactor.forget(trace)
        self._arrangements.forget(trace)
        self._row_indexes.pop(name, None)
