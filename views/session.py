"""The session a user holds: DDL, ingest, reads, explain (the API.md contract).

One DuckDB database holds the catalog (with each view's manifest), the epoch and, in
embedded mode, every trace. Each ``ingest`` is one transaction: the batch is validated,
every affected view computes its change from the change alone, state is appended, the
epoch advances, and only then does it commit; any error rolls all of it back. Tables
and views are DuckDB views under their own names, so ``sql()`` reads them as relations.

What depends on the mode is the session's engine (``views.engine``): ``EmbeddedEngine``
(``views.embedded``) or, with ``spark=``, ``SparkEngine`` (``views.spark.engine``). DDL,
ingest, the state of views and name lookup are mixed in from ``views.ddl``,
``views.ingest``, ``views.view_state`` and ``views.names``; threads share a session as
``views.concurrency`` says, and its memory is bounded as ``views.resources`` says.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Any

import duckdb
import pyarrow as pa

from ivm.circuit.circuit import Circuit
from ivm.errors import IvmError, SqlError, StateError
from ivm.execution.bounded_arrangements import BoundedArrangements
from ivm.execution.embedded import DEFAULT_ITERATION_LIMIT, OperatorMemory
from ivm.execution.profile import EpochProfile
from ivm.execution.registrations import Registrations
from ivm.execution.row_index import RowIndex
from ivm.guard import guard_public
from ivm.passes.cyclic_joins import JoinPlan
from ivm.passes.factorize import factorize
from ivm.plan.node import Plan
from ivm.schema import Schema, TableSchema, quote
from ivm.sql_frontend.planner import plan_query
from ivm.sql_frontend.positions import TEXT_START, Origin
from ivm.sql_frontend.statements import parse_script
from ivm.storage.catalog import Catalog, CatalogError
from ivm.storage.heap import keep_large_blocks_mapped
from ivm.storage.manifest import Manifest
from ivm.storage.memory import MemoryBudget
from ivm.storage.naming import TableNames
from ivm.storage.traces import Compactor
from ivm.views.aggregate_plans import aggregate_plan_for, aggregate_plan_property
from ivm.views.concurrency import ReadCursors, serialize_public
from ivm.views.ddl import Ddl
from ivm.views.definitions import TableInfo, ViewDef, ViewInfo, table_info, view_info
from ivm.views.diagnose import ViewFailed
from ivm.views.embedded import EmbeddedEngine
from ivm.views.engine import Engine
from ivm.views.ingest import Ingest
from ivm.views.join_plans import join_plan_property
from ivm.views.loading import load_stream, release_spooled, streamed
from ivm.views.names import Names
from ivm.views.progress import checked, shown
from ivm.views.read_queries import check_read_query
from ivm.views.recompute import recompute_fraction_property
from ivm.views.resources import held_bytes, memory_limit_property, release_memory, settle
from ivm.views.saved_indexes import SavedIndexes
from ivm.views.state_file import claim, close_state, open_state, release, settle_settings
from ivm.views.surface import Surface
from ivm.views.table_codec import table_from_json
from ivm.views.transaction import Transaction, run_all
from ivm.views.view_state import ViewState


class Session(Surface, Ddl, Ingest, ViewState, Names):
    """An ivm database: tables, views, and the epoch they are at. Every public method and
    property lets only ``ivm.IvmError`` out (``ivm.guard``: each subclass is guarded too)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        guard_public(cls)

    def __init__(
        self, path: str | os.PathLike[str] | None = None, on_plan_change: str = "rebuild",
        settings: Mapping[str, str] | None = None, *,
        engine: Callable[[Session], Engine] = EmbeddedEngine,
        memory_limit: int | str | None = None,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self._lock = threading.RLock()  # one call at a time changes the session
        self._budget = MemoryBudget(memory_limit)  # DuckDB's and the state's memory
        keep_large_blocks_mapped()  # freed arrays go back to the system (ivm.storage.heap)
        self._state_file = claim(self.path)  # before anything: refused at once if held
        self._closed = False
        self._ready = False  # opened whole: only then are its indexes saved at close
        try:
            self._engine: Engine = engine(self)  # what depends on the mode (views.engine)
            self._con = open_state(self._state_file, self._budget)
        except BaseException:
            release(self._state_file)
            raise
        self._reads = ReadCursors(self._con, lambda: self.settings)  # reads at the last commit
        self.on_plan_change = on_plan_change
        self._iteration_limit = DEFAULT_ITERATION_LIMIT
        self._names = TableNames()
        self._compactor = Compactor()
        self._changed_rows: dict[str, int] = {}  # this epoch's, by table or view
        self._retractions: dict[str, int | None] = {}  # this epoch's rows of w < 0, by trace
        self._direct: frozenset[str] = frozenset()  # views whose change is appended at once
        self._direct_changes: dict[str, pa.Table] = {}  # …and their changes (direct_changes)
        self._tables: dict[str, TableSchema] = {}
        self._arrow_schemas: dict[str, pa.Schema] = {}
        self._views: dict[str, ViewDef] = {}
        self._no_change: dict[str, pa.Table] = {}  # each view's empty change, by name
        self._row_indexes: dict[str, RowIndex] = {}  # base tables' live rows, built at first use
        self._operator_memory: OperatorMemory = {}  # operators' in-memory state (Run.memory)
        self._arrangements = BoundedArrangements(self._con, self._budget)  # traces by key
        self._budget.held = partial(held_bytes, self)
        # DuckDB's DESCRIBE of SQL while the stored views were planned at open (and those the
        # last session saved): asked again only if not there. Emptied by any DDL.
        self._described: dict[str, Schema] = {}
        self._opening = False
        self._columns_at_open: dict[str, tuple[tuple[str, str], ...]] | None = None
        self._profile = EpochProfile()  # the epoch running (or the last one)
        self.last_profile: EpochProfile | None = None  # the last epoch applied
        self._registered_batches = Registrations(self._con)  # Arrow DuckDB reads this epoch
        self._spooled: list[Path] = []  # Spark mode: streams this ingest spooled to files
        self._on_commit: list[Callable[[], None]] = []  # run after the open transaction commits
        self._on_rollback: list[Callable[[], None]] = []  # …or, in reverse, after it rolls back
        self._pending_rebuilds: list[tuple[ViewDef, Manifest | None, str]] = []
        self._saved = SavedIndexes(self)  # the indexes a clean close saves for the next open
        self._init_outside()
        try:
            try:
                self._catalog = Catalog(self._con)
            except CatalogError as error:
                raise StateError(f"state at {self.path}: {error}") from error
            self._engine.check_mode()
            self.settings = settle_settings(self._con, self._catalog, settings, self.path)
            self._load()
            self._opened()
            self._ready = True
        except duckdb.Error as error:
            self.close()
            raise StateError(f"state at {self.path} is unusable: {error}") from error
        except BaseException:
            self.close()
            raise

    def _check_open(self) -> None:
        if self._closed:
            raise StateError("this session is closed: open a new one with ivm.connect()")

    def _load(self) -> None:
        """Register the stored tables, take back what the last session saved, and register
        the stored views (planning every view again)."""
        entries = self._catalog.entries()
        for kind, name, definition in entries:
            if kind == "table":
                self._register_table(table_from_json(name, definition))
        self._saved.take()
        self._opening = True
        self._columns_at_open = self._table_columns()  # read once for every view's check
        try:
            for kind, name, definition in entries:
                if kind != "table":
                    self._load_view(name, definition)
        finally:
            self._opening, self._columns_at_open = False, None
        self._check_tables_present()
        self._saved.forget_unknown_views()

    def _opened(self) -> None:
        """Make the loaded state ready: upgrade an older format, and rebuild the views whose
        state was computed for another plan; then publish them (Spark: its catalog)."""
        self._engine.opening()
        if self._catalog.upgraded_from is not None:
            with self._transaction(StateError):
                self._catalog.upgrade()
        self._rebuild_pending()
        self._engine.opened()
        self._published()

    # -- public API --------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """The last epoch applied (0 before any ingest), as the state's catalog records
        it. Both modes."""
        return self._catalog.epoch

    @property
    def iteration_limit(self) -> int:
        """The most iterations a recursive view may take in one epoch (default 1000). A
        recursion still running past it raises ``ivm.IterationLimitError`` naming the view,
        and the batch (or the view's creation) is rejected whole. Settable (a positive
        integer). Both modes."""
        return self._iteration_limit

    @iteration_limit.setter
    def iteration_limit(self, limit: int) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise IvmError(f"iteration_limit must be a positive integer, not {limit!r}")
        self._iteration_limit = limit

    join_plan = join_plan_property()
    aggregate_plan = aggregate_plan_property()
    recompute_fraction = recompute_fraction_property()
    memory_limit = memory_limit_property()

    @property
    def tables(self) -> Mapping[str, TableInfo]:
        """Every base table by name, with its columns and its SQL (read-only). Both modes."""
        self._check_open()
        return MappingProxyType(
            {n: table_info(t, self._arrow_schemas[n]) for n, t in self._tables.items()}
        )

    @property
    def views(self) -> Mapping[str, ViewInfo]:
        """Every maintained view by name, with its columns and its SQL (read-only). Both
        modes."""
        self._check_open()
        return MappingProxyType(
            {n: view_info(v, self._arrow_schema(v.schema)) for n, v in self._views.items()}
        )

    def execute(self, sql: str, *, progress: bool | None = None) -> None:
        """Run DDL: CREATE [OR REPLACE] TABLE, CREATE [OR REPLACE] [MATERIALIZED] VIEW,
        DROP VIEW, DROP TABLE (… CASCADE drops the views that read it too), ALTER TABLE …
        ADD / DROP / RENAME COLUMN (the rows kept, the views reading the table planned and
        filled again; ``views.altering``), and REFRESH [MATERIALIZED] VIEW (a no-op, with
        an ``IvmWarning``: views are always fresh). Both modes.

        A script of several statements is applied atomically: if one fails, none applies.
        ``progress`` draws a bar of a long script (views' backfills) on stderr: None (the
        default) when stderr is a terminal and it runs past a second (``views.progress``).
        """
        self._check_open()
        checked(progress, "execute")
        statements = parse_script(sql)
        self._described.clear()  # tables change: what DuckDB answered may no longer hold
        try:
            with shown(self, "running DDL (filling views)", progress), self._transaction():
                for statement in statements:
                    self._run_statement(statement)
            self._published()  # committed: readers on other threads see it now
        except ViewFailed as failure:
            raise self._explain_backfill(failure) from failure.error

    def ingest(
        self, table: str | Mapping[str, Any], batch: Any = None, mode: str = "insert",
        *, epoch: int | None = None, sequence: str | None = None, progress: bool | None = None,
    ) -> dict[str, pa.Table]:
        """Apply one epoch of changes; returns every view's change (a consolidated Z-set).

        ``ingest(table, batch)`` or ``ingest({table: batch, …})`` (one atomic epoch; not
        both). ``mode="insert"`` (default) or ``"upsert"`` (an insert replaces the row with
        its key; of several inserts of one key the last wins, in batch order or by the
        batch's column ``sequence=``). Debezium key-only deletes and truncates apply
        (``views.arrival``). ``epoch=N`` applies the batch exactly once as epoch N
        (``views.epochs``): N already applied returns that epoch's deltas and does nothing.
        A batch with no rows and no ``epoch=`` is a no-op: the epoch stays. A
        ``RecordBatchReader`` or DuckDB relation streams in chunks, one epoch; ``progress``
        shows a bar of the rows loaded (``views.loading``), or, for a batch not streamed,
        of the epoch's work once it runs past a second (``views.progress``; None: when
        stderr is a terminal). Batches: ``views.batches``. Both modes
        (Spark mode spools a stream to Arrow files under the state and applies it as one
        Spark batch).
        """
        checked(progress, "ingest")
        replay = self._replayed(epoch)
        if replay is not None:
            return replay
        if streamed(self, table, batch, progress):
            return load_stream(self, table, batch, mode, sequence, progress, epoch is not None)
        profile = self._profile = EpochProfile(self.epoch + 1)
        try:
            with profile.phase("batches"):
                changes = self._prepared(table, batch, mode, sequence)
            if epoch is None and self._no_rows(changes):
                return self._unchanged()
            with shown(self, f"epoch {self.epoch + 1}", progress):
                deltas = self._engine.commit_epoch(changes, upsert=mode == "upsert")
        finally:
            release_spooled(self)
        return self._finish_epoch(profile, deltas)

    def read(self, name: str) -> pa.Table:
        """``name``'s (a view's or table's) current contents, one row per copy. Both modes."""
        self._check_open()
        return self._engine.read(self._readable(name))

    def sql(self, query: str) -> pa.Table:
        """Run ``query``, one read-only query over tables and views. Both modes."""
        self._check_open()
        check_read_query(query)
        return self._engine.sql(query)

    def dataframe(self, name: str) -> Any:
        """The current contents of a table or view as a Spark DataFrame (read when used).
        Spark mode only: an embedded session raises ``IvmError``."""
        self._check_open()
        return self._engine.dataframe(self._known(name))

    @property
    def spark(self) -> Any:
        """The SparkSession this session's epochs run on (Spark mode; None embedded)."""
        return self._engine.spark

    @property
    def partitions(self) -> int | None:
        """How many partitions the state has, fixed at its creation (Spark; None embedded)."""
        return self._engine.partitions

    @property
    def _failure(self) -> Any:
        """Spark mode's test hook: a ``FailurePoint`` (``ivm.execution.spark.tasks``)."""
        return self._engine.failure

    @_failure.setter
    def _failure(self, point: Any) -> None:
        self._engine.failure = point

    def close(self) -> None:
        """Close the session; persistent state stays on disk, with its in-memory indexes
        saved for the next open (``views.saved_indexes``), and a server ``serve`` started
        stops. Closing twice is harmless. Both modes (Spark mode leaves the SparkSession
        running: it is the caller's)."""
        if not self._closed:
            self._closed = True
            try:
                run_all(self._on_close_actions)  # servers stop (views.serving)
                if self._ready:
                    self._records.flush(self._con)  # the epochs' times held
                    self._saved.save()
                    self._engine.closing()  # Spark: sparse partition files rewritten
            finally:
                try:
                    self._reads.close()
                    close_state(self._con, self._state_file if self._ready else None)
                finally:
                    release(self._state_file)
                    release_memory(self)

    def _commit_actions_failed(self) -> None:
        """An action run after a commit failed (the commit stands, the error is raised):
        the in-memory indexes it was bringing up to date may be half done, so all of them
        are dropped, to be built from the traces again at first use."""
        self._row_indexes.clear()
        self._operator_memory.clear()
        self._arrangements.clear()

    def _after_unexpected(self) -> None:
        """After an unexpected exception (``ivm.guard``): drop what is rebuilt at first use."""
        self._row_indexes.clear()
        self._operator_memory.clear()
        self._described.clear()
        self._no_change = {}

    # -- names and plans ---------------------------------------------------------------------

    def _plan(self, sql: str, origin: Origin = TEXT_START) -> Plan:
        relations = {n: t.schema for n, t in self._tables.items()}
        relations.update({n: v.schema for n, v in self._views.items()})
        plan = plan_query(sql, relations, self._describe, origin=origin)
        return factorize(plan, self._describe, aggregate_plan_for(self, sql))

    def _circuit(self, plan: Plan, name: str, join_plan: JoinPlan | None = None) -> Circuit:
        """The incremental circuit this session runs for a view's plan (its engine's)."""
        return self._engine.circuit(plan, name, join_plan)

    def _describe(self, sql: str) -> Schema:
        """The schema DuckDB gives ``sql`` (answers kept while opening: ``views.saved_indexes``)."""
        return self._saved.describe(sql)

    def _arrow_schema(self, schema: Schema) -> pa.Schema:
        columns = ", ".join(f"CAST(NULL AS {c.type}) AS {quote(c.name)}" for c in schema.columns)
        return self._con.sql(f"SELECT {columns} WHERE false").to_arrow_table().schema

    # -- transactions ------------------------------------------------------------------------

    def _transaction(self, error_class: type[IvmError] = SqlError) -> Transaction:
        settle(self)  # the memory held within the limit, DuckDB given what it leaves
        return Transaction(self, error_class)

    def _snapshot(self) -> tuple[dict[str, Any], ...]:
        """The in-memory catalog, restored when a transaction rolls back."""
        return (dict(self._tables), dict(self._arrow_schemas), dict(self._views))

    def _restore(self, saved: tuple[dict[str, Any], ...]) -> None:
        """Put back what ``snapshot`` returned."""
        tables, arrow_schemas, views = saved
        self._tables, self._arrow_schemas, self._views = tables, arrow_schemas, views
        self._no_change = {}


guard_public(Session)
serialize_public(Session)  # one call at a time, but reads (views.concurrency)


__all__ = ["Session", "ViewDef"]
