"""Embedded mode's engine: every trace in the session's own DuckDB database.

A view's state is its output trace (its contents) and the traces its circuit's
operators keep, each named by the owning operator's fingerprint and the trace's
role; ``manifest`` lists them with the plan's fingerprint and the engine's state
format. An epoch runs in the session's connection, inside one transaction
(``views.ingest``), and reads go to that connection too.
"""

from __future__ import annotations

import re
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from ivm.circuit.circuit import Circuit
from ivm.circuit.incrementalize import incrementalize
from ivm.errors import (
    ExecutionError,
    InternalError,
    IterationLimitError,
    IvmError,
    IvmWarning,
    SqlError,
    StateError,
)
from ivm.execution.embedded import EpochRunner, create_traces, run_sql
from ivm.operators.base import STATE_FORMAT
from ivm.passes import optimize
from ivm.passes.cyclic_joins import JoinPlan
from ivm.plan.node import Plan
from ivm.plan.sql import consolidate_sql
from ivm.schema import TableSchema, quote
from ivm.storage.manifest import Manifest, TraceEntry
from ivm.storage.sqltext import unquote
from ivm.storage.threads import one_thread_if_small, thread_count
from ivm.storage.traces import create_reader, create_trace
from ivm.views.batches import normalize_batch
from ivm.views.definitions import ViewDef
from ivm.views.diagnose import EXISTING, ViewFailed
from ivm.views.resources import (
    READ_ADVICE,
    as_resource,
    check_batches,
    check_changes,
    epoch_resource,
    ingest_subject,
    view_subject,
)
from ivm.views.view_state import columns_of
from ivm.views.warmup import warm

if TYPE_CHECKING:
    from ivm.views.session import Session


class EmbeddedEngine:
    """The engine of an embedded session (``views.engine.Engine``; module docstring)."""

    mode = "embedded"
    saves_indexes = True
    spark = None
    partitions = None

    def __init__(self, session: Session) -> None:
        self.session = session
        self.failure: Any = None  # Spark mode's test hook; nothing fails here
        self._threads: int | None = None  # DuckDB's threads outside epochs, read at the first

    # -- opening -----------------------------------------------------------------------------

    def check_mode(self) -> None:
        """Refuse state kept by Spark mode: its contents are not in this database."""
        s = self.session
        if s._catalog.mode() is not None:
            raise StateError(
                f"state at {s.path} was created in Spark mode: "
                "open it with ivm.connect(path, spark=spark)"
            )

    def opening(self) -> None:
        """Nothing to recover: the database's own transactions keep it consistent."""

    def opened(self) -> None:
        """Nothing to publish: the tables and views are DuckDB views already."""

    # -- tables and views --------------------------------------------------------------------

    def circuit(self, plan: Plan, name: str, join_plan: JoinPlan | None) -> Circuit:
        """The incremental circuit for a view's plan, with n-way joins kept whole."""
        circuit = incrementalize(plan, name, self.session._describe)
        return optimize(circuit, partitioned=False, join_plan=join_plan or JoinPlan())

    def table_registered(self, table: TableSchema) -> None:
        """Nothing beyond the catalog: the table's trace is in the database."""

    def publish(self, name: str) -> None:
        """Nothing: the table or view is a DuckDB view under its own name."""

    def manifest(self, view: ViewDef) -> Manifest:
        """The manifest of the state the view's circuit keeps today."""
        names = self.session._names
        traces = [
            TraceEntry(
                names.operator_trace(view.name, op.fingerprint, spec.role),
                columns_of(spec.schema),
                spec.key,
            )
            for op, spec in view.circuit.traces()
        ]
        output = names.relation_trace(view.name)
        traces.append(TraceEntry(output, columns_of(view.schema), ()))
        return Manifest.of(STATE_FORMAT, view.circuit.fingerprint, traces)

    def check_state(self, view: ViewDef, manifest: Manifest) -> None:
        """Every trace the manifest lists is there with its columns; else StateError."""
        s = self.session
        present = s._columns_at_open or s._table_columns()
        for trace in manifest.traces:
            found = present.get(unquote(trace.location))
            if found != trace.columns:
                what = "is missing" if found is None else "has other columns"
                raise StateError(
                    f"state at {s.path} is damaged: trace {trace.location} of view "
                    f"{view.name!r} {what}"
                )

    def build_view_state(self, view: ViewDef, rebuild: bool = False) -> None:
        """Create the view's traces and fill them from its inputs (backfill); ``rebuild``:
        in place of state computed for another plan (dropped already, here)."""
        s = self.session
        trace = s._names.relation_trace(view.name)
        create_trace(s._con, trace, list(columns_of(view.schema)))
        create_traces(s._con, s._names, view.circuit)
        runner = EpochRunner(
            s._con, s._names, {}, backfill=True, iteration_limit=s.iteration_limit,
            epoch=s._catalog.epoch,
        )
        try:
            delta = runner.run(view.circuit)
            # The delta's SQL reads operators' integrals (their traces before the epoch):
            # run it before the state appends (a join of two changed inputs read an
            # aggregate's new row twice when the appends ran first).
            s._compactor.created(trace)
            s._on_rollback.append(lambda: s._compactor.forget(trace))
            if delta is not None:
                consolidated = consolidate_sql(delta, view.schema.names)
                rows = run_sql(s._con, f"INSERT INTO {trace} {consolidated}", view.name)
                s._compactor.appended(trace, rows, consolidated=True)
            for table, rows in runner.commits:
                count = run_sql(s._con, f"INSERT INTO {table} {rows}", view.name)
                s._compactor.backfilled(table, count)
                s._on_rollback.append(lambda t=table: s._compactor.forget(t))
        except IterationLimitError as error:
            raise IterationLimitError(f"view {view.name!r}: {error}") from None
        except (ExecutionError, InternalError) as error:  # explained by _explain_backfill
            raise ViewFailed(view, error, EXISTING) from error
        create_reader(s._con, view.name, trace, view.schema.names)
        s._catalog.set_manifest(view.name, self.manifest(view))
        s._on_commit.append(lambda: self._warm(view))

    def _warm(self, view: ViewDef) -> None:
        """Build the arrangements ``view``'s epochs read when the inputs the last epoch
        changed change again, once it is committed (``views.warmup``), unless it was
        dropped since."""
        s = self.session
        changing = [source for source in view.sources if s._changed_rows.get(source)]
        if s._views.get(view.name) is view and changing:
            schemas = {source: s._schema_of(source) for source in changing}
            warm(s._con, s._names, s._arrangements, view, schemas,
                 s._catalog.epoch, s.iteration_limit)

    def drop_view_state(self, name: str, manifest: Manifest | None) -> None:
        """Drop a view's reader and every trace of its state (as its manifest lists them;
        state from before manifests: the operator traces of that format's naming)."""
        s = self.session
        s._con.execute(f"DROP VIEW IF EXISTS {quote(name)}").fetchall()
        tables = [s._names.relation_trace(name)]
        if manifest is not None:
            tables += [t.location for t in manifest.traces]
        else:
            legacy = re.compile(rf"__ivm_op_{re.escape(name)}#\d+")
            tables += [quote(t) for t in s._table_columns() if legacy.fullmatch(t)]
        for table in dict.fromkeys(tables):
            s._con.execute(f"DROP TABLE IF EXISTS {table}").fetchall()
            s._compactor.forget(table)
            s._arrangements.forget(table)
        for key in [k for k in s._operator_memory if k[0] == name]:
            del s._operator_memory[key]
        s._arrangements.release(name)

    def removing(self, name: str) -> None:
        """Nothing outside the database to remove."""

    # -- epochs ------------------------------------------------------------------------------

    def prepare(self, name: str, batch: Any) -> Any:
        """One table's batch made ready to apply (here: a normalized Arrow Z-set)."""
        s = self.session
        return normalize_batch(batch, s._tables[name], s._arrow_schemas[name])

    def commit_epoch(self, batches: dict[str, Any], upsert: bool) -> dict[str, str]:
        """Apply one epoch and commit it (the epoch counter included); returns the scratch
        tables holding each changed view's change. Nothing is applied if it fails; a
        failure for memory is a ResourceError naming the table or view (``views.resources``:
        the batches and the views' changes must fit in the session's memory limit)."""
        s = self.session
        check_batches(s, batches)
        if self._threads is None:
            self._threads = thread_count(s._con)
        rows = sum(b.num_rows for b in batches.values() if isinstance(b, pa.Table))
        try:
            with (
                one_thread_if_small(s._con, rows, self._threads),  # ivm.storage.threads
                s._transaction(ExecutionError),
            ):
                changed = s._apply(batches, upsert, direct=True)
                check_changes(s, changed)
                s._advance_epoch(changed)
                applied = time.perf_counter()
            s._profile.phases["commit"] = time.perf_counter() - applied
        except ViewFailed as failure:
            resource = as_resource(failure.error, view_subject(failure.view.name), s._budget)
            raise resource or s._explain_ingest(batches, upsert, failure) from failure.error
        except Exception as error:
            phase = next(reversed(s._profile.phases), "")
            resource = epoch_resource(s, error, ingest_subject(batches, phase))
            if resource is None or resource is error:
                raise
            raise resource from error
        finally:
            s._unregister_batches()
        return changed

    def closing(self) -> None:
        """Nothing: the state file itself is rewritten as it closes (``views.state_file``)."""

    def compact(self) -> None:
        """Compact the traces that are due (after the epoch committed: a failure warns)."""
        s = self.session
        keys: dict[str, tuple[str, ...]] = {}
        for table in s._tables.values():
            keys[s._names.relation_trace(table.name)] = table.primary_key
        for view in s._views.values():
            for op, spec in view.circuit.traces():
                keys[s._names.operator_trace(view.name, op.fingerprint, spec.role)] = spec.key
        # Compaction changes no contents, and the epoch is already committed: a failure
        # here (DuckDB's, or the disk's: a full disk) must not turn a successful ingest
        # into an error, which says nothing was applied. It is retried later.
        try:
            s._compactor.compact_due(s._con, keys)
        except (duckdb.Error, OSError) as error:
            warnings.warn(f"ivm: trace compaction failed, will retry: {error}", IvmWarning,
                          stacklevel=3)

    # -- reads -------------------------------------------------------------------------------

    def read(self, name: str) -> pa.Table:
        """The table's or view's DuckDB view as of the last commit, read on this thread's
        cursor (``views.concurrency``: never an epoch in flight, never waiting for it). One
        dropped by a DDL committing just now is not there: SqlError."""
        try:
            return self._read(f"SELECT * FROM {quote(name)}", None, f"reading {name!r}")
        except duckdb.CatalogException as error:
            raise SqlError(f"no table or view named {name!r}") from error

    def sql(self, query: str) -> pa.Table:
        """The query as of the last commit, on this thread's cursor (as ``read``)."""
        return self._read(query, SqlError, "the query")

    def _read(self, query: str, error_class: type[SqlError] | None, what: str) -> pa.Table:
        s = self.session
        try:
            return s._reads.query(query, error_class)
        except (duckdb.OutOfMemoryException, MemoryError) as error:
            subject = f"{what} ran out of memory"
            raise as_resource(error, subject, s._budget, READ_ADVICE) or error from error

    def live_sql(self, name: str) -> str:
        """A query of the table's live rows, one row per copy (for ``views.arrival``)."""
        return f"SELECT * FROM {quote(name)}"

    def dataframe(self, name: str) -> Any:
        """Refused: an embedded session has no Spark session."""
        raise IvmError(
            "dataframe() is for Spark mode: open the state with ivm.connect(path, spark=spark)"
        )

    def directory(self, name: str) -> Path | None:
        """None: the table's or view's state is in the session's database."""
        return None

    def explain_tail(self, view: str) -> str | None:
        """None: the circuit is all there is to say."""
        return None

    def stages(self, view: str) -> list[tuple[str, Any]]:
        """None: embedded epochs have no stages."""
        return []
