"""The state of each view (embedded mode): built, dropped, and checked against its manifest.

A view's state is its output trace (its contents) and the traces its circuit's
operators keep, each named by the owning operator's fingerprint and the
trace's role. ``_manifest`` lists them with the plan's fingerprint and the
engine's state format; the catalog stores it with the state.

Reopening plans every view again from its SQL and compares manifests before
any state is read. Equal: the traces must all be there as listed (else the
state is damaged: ``StateError``). Different (an upgrade changed the plan, or
the state predates manifests): the view is rebuilt from its inputs with an
``IvmWarning``, or, with ``on_plan_change="refuse"``, refused with a
``StateError`` naming the view. Old state is never attached to an operator
that did not write it.
"""

from __future__ import annotations

import re
import warnings
from typing import TYPE_CHECKING

import duckdb

from ivm.errors import (
    ExecutionError,
    InternalError,
    IterationLimitError,
    IvmError,
    IvmWarning,
    StateError,
)
from ivm.execution.embedded import EpochRunner, create_traces, run_sql
from ivm.operators.base import STATE_FORMAT
from ivm.plan.sql import consolidate_sql
from ivm.schema import Schema, quote
from ivm.storage.catalog import CatalogError
from ivm.storage.manifest import Manifest, TraceEntry
from ivm.storage.sqltext import unquote
from ivm.storage.traces import create_reader, create_trace
from ivm.views.definitions import ViewDef
from ivm.views.diagnose import EXISTING, ViewFailed, explain_failure, explain_internal
from ivm.views.warmup import warm

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
        expected = self._manifest(view)
        if stored == expected:
            self._check_state(view, expected)
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
                    self._drop_view_state(view.name, stored)
                    self._build_view_state(view, rebuild=True)
            except ViewFailed as failure:
                if failure.internal is not None:
                    raise self._explain_backfill(failure) from failure.error
                raise StateError(
                    f"view {view.name!r} cannot be rebuilt from its inputs: {failure}"
                ) from failure.error

    def _explain_backfill(self, failure: ViewFailed) -> IvmError:
        """A new view's failure over existing rows in the user's terms (in a throwaway
        transaction: the failed one is unusable): the expression a value failed in, or,
        for SQL of ivm's own, the construct it was for."""
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

    def _manifest(self, view: ViewDef) -> Manifest:
        """The manifest of the state the view's circuit keeps today."""
        traces = [
            TraceEntry(
                self._names.operator_trace(view.name, op.fingerprint, spec.role),
                columns_of(spec.schema),
                spec.key,
            )
            for op, spec in view.circuit.traces()
        ]
        output = self._names.relation_trace(view.name)
        traces.append(TraceEntry(output, columns_of(view.schema), ()))
        return Manifest.of(STATE_FORMAT, view.circuit.fingerprint, traces)

    def _check_state(self, view: ViewDef, manifest: Manifest) -> None:
        """Every trace the manifest lists is there with its columns; else StateError."""
        present = self._columns_at_open or self._table_columns()
        for trace in manifest.traces:
            found = present.get(unquote(trace.location))
            if found != trace.columns:
                what = "is missing" if found is None else "has other columns"
                raise StateError(
                    f"state at {self.path} is damaged: trace {trace.location} of view "
                    f"{view.name!r} {what}"
                )

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

    # -- building and dropping ---------------------------------------------------------------

    def _build_view_state(self, view: ViewDef, rebuild: bool = False) -> None:
        """Create the view's traces and fill them from its inputs (backfill); ``rebuild``:
        in place of state computed for another plan (dropped already, here)."""
        trace = self._names.relation_trace(view.name)
        create_trace(self._con, trace, list(columns_of(view.schema)))
        create_traces(self._con, self._names, view.circuit)
        runner = EpochRunner(
            self._con, self._names, {}, backfill=True, iteration_limit=self.iteration_limit,
            epoch=self._catalog.epoch,
        )
        try:
            delta = runner.run(view.circuit)
            # The delta's SQL reads operators' integrals (their traces before the epoch):
            # run it before the state appends (a join of two changed inputs read an
            # aggregate's new row twice when the appends ran first).
            self._compactor.created(trace)
            self._on_rollback.append(lambda: self._compactor.forget(trace))
            if delta is not None:
                consolidated = consolidate_sql(delta, view.schema.names)
                rows = run_sql(self._con, f"INSERT INTO {trace} {consolidated}", view.name)
                self._compactor.appended(trace, rows, consolidated=True)
            for table, rows in runner.commits:
                run_sql(self._con, f"INSERT INTO {table} {rows}", view.name)
        except IterationLimitError as error:
            raise IterationLimitError(f"view {view.name!r}: {error}") from None
        except (ExecutionError, InternalError) as error:  # explained by _explain_backfill
            raise ViewFailed(view, error, EXISTING) from error
        create_reader(self._con, view.name, trace, view.schema.names)
        self._catalog.set_manifest(view.name, self._manifest(view))
        self._on_commit.append(lambda: self._warm(view))

    def _warm(self, view: ViewDef) -> None:
        """Build the arrangements ``view``'s epochs read when the inputs the last epoch
        changed change again, once it is committed (``views.warmup``), unless it was
        dropped since."""
        changing = [s for s in view.sources if self._changed_rows.get(s)]
        if self._views.get(view.name) is view and changing:
            schemas = {s: self._schema_of(s) for s in changing}
            warm(self._con, self._names, self._arrangements, view, schemas,
                 self._catalog.epoch, self.iteration_limit)

    def _drop_view_state(self, name: str, manifest: Manifest | None) -> None:
        """Drop a view's reader and every trace of its state (as its manifest lists them;
        state from before manifests: the operator traces of that format's naming)."""
        self._con.execute(f"DROP VIEW IF EXISTS {quote(name)}").fetchall()
        tables = [self._names.relation_trace(name)]
        if manifest is not None:
            tables += [t.location for t in manifest.traces]
        else:
            legacy = re.compile(rf"__ivm_op_{re.escape(name)}#\d+")
            tables += [quote(t) for t in self._table_columns() if legacy.fullmatch(t)]
        for table in dict.fromkeys(tables):
            self._con.execute(f"DROP TABLE IF EXISTS {table}").fetchall()
            self._compactor.forget(table)
            self._arrangements.forget(table)
        for key in [k for k in self._operator_memory if k[0] == name]:
            del self._operator_memory[key]
        self._arrangements.release(name)

    def _drop_table_state(self, name: str) -> None:
        """Drop a base table's reader and trace."""
        self._con.execute(f"DROP VIEW IF EXISTS {quote(name)}").fetchall()
        trace = self._names.relation_trace(name)
        self._con.execute(f"DROP TABLE IF EXISTS {trace}").fetchall()
        self._compactor.forget(trace)
        self._arrangements.forget(trace)
        self._row_indexes.pop(name, None)
