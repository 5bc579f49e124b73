"""Spark mode: the same API (API.md), each epoch run on Spark over partition files.

The driver keeps the catalog and the epoch in ``<path>/ivm.duckdb`` (with empty
copies of every relation, so views are planned and typed exactly as in
embedded mode). Contents and state live in partition files
(``ivm.storage.partitions``), written only by Spark tasks (``ivm.execution.spark.executor``).

An ingest is one epoch:

1. each batch becomes a DataFrame (Spark DataFrames are normalized on the
   executors) and goes through its table's stage, which checks it against the
   stored rows and appends it;
2. every affected view runs its stages (a view reading another view reads that
   view's change of the same epoch); 1 and 2 are one Spark job
   (``ivm.execution.spark.epoch_job``);
3. only when every stage succeeded does the driver commit the epoch.

Each task carries the epoch, the last committed epoch and a token naming this
ingest attempt: a task Spark retries re-emits what its first attempt stored,
and a partition that applied an epoch which was never committed rolls it
back (right away when the ingest fails, when the session opens, and at the
latest when a task next touches it).

Each table and view is registered in the Spark SQL catalog (a temporary view
over the ``ivm`` data source, ``ivm.views.spark.source``); reads live in
``ivm.views.spark.reads``. A view's manifest lists its stages' traces, each
``<stage>/<table>``; stage directories are named by their operator's
fingerprint, so a rebuilt view never reads another plan's files.
"""

from __future__ import annotations

import functools
import os
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import SparkSession as PySparkSession
from pyspark.sql.pandas.types import to_arrow_schema

from ivm.circuit.circuit import Circuit
from ivm.circuit.incrementalize import incrementalize
from ivm.errors import ExecutionError, IvmError, StateError
from ivm.execution.spark.epoch_job import TableRun, ViewRun, run_epoch
from ivm.execution.spark.executor import SparkEpoch, translate_error
from ivm.execution.spark.job_session import JobSession
from ivm.execution.spark.spark_types import spark_struct
from ivm.execution.spark.stage_task import Ticket, stage_traces
from ivm.execution.spark.stages import Stage, table_stage, view_stages
from ivm.execution.spark.tasks import FailurePoint, TaskTimes, failed_view
from ivm.execution.spark.wire import arrow_schema, conform, from_wire_sql, to_wire_sql
from ivm.operators.base import STATE_FORMAT
from ivm.passes import optimize
from ivm.plan.node import Plan
from ivm.schema import TableSchema, quote
from ivm.storage.manifest import Manifest, TraceEntry
from ivm.storage.partitions import (
    partition_files,
    roll_back_ahead,
    stray_directories,
    table_directory,
    view_directory,
    write_fence,
)
from ivm.storage.sqltext import unquote
from ivm.storage.traces import create_reader, create_trace
from ivm.views.batches import normalize_batch
from ivm.views.definitions import ViewDef
from ivm.views.diagnose import named
from ivm.views.session import Session
from ivm.views.spark.batches import normalize_task
from ivm.views.spark.quiet import quiet_tasks
from ivm.views.spark.reads import SparkReads
from ivm.views.spark.source import IvmDataSource
from ivm.views.spark.workers import check_workers
from ivm.views.view_state import columns_of

MODE = "spark"


class SparkModeSession(SparkReads, Session):
    """An ivm database whose epochs run on Spark (see the module docstring)."""

    saves_indexes = False  # its state directory holds partitions; its epochs keep no memory

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        spark: PySparkSession,
        partitions: int | None = None,
        on_plan_change: str = "rebuild",
        settings: Mapping[str, str] | None = None,
    ) -> None:
        if path is None:
            raise StateError(
                "Spark mode keeps its state in files: pass a path every executor can reach "
                "(a shared filesystem on a cluster)"
            )
        if partitions is not None and (not isinstance(partitions, int) or partitions < 1):
            raise IvmError(f"partitions must be a positive integer, not {partitions!r}")
        check_workers(spark)
        self.spark = spark
        self._jobs = JobSession(spark)  # where epochs run: the same SparkContext, AQE off
        self.partitions = partitions or 0  # settled by _check_mode
        self.failure: FailurePoint | None = None  # test hook: make chosen tasks fail
        # Stage tasks add their seconds here, by table or view (``stats``, ``explain``).
        self._task_times = spark.sparkContext.accumulator({}, TaskTimes())
        # Stages by the circuit (or table schema) object they were cut from: a view
        # replaced or a DDL rolled back leaves a stale entry, never a wrong one.
        self._stages: dict[int, tuple[object, list[Stage]]] = {}
        super().__init__(path, on_plan_change, settings)

    def _opened(self) -> None:
        """Recover partitions a dead driver left ahead, then rebuild and register."""
        write_fence(self.root, "opened")  # no task of an earlier session may write now
        self._recover()
        self._remove_strays()
        self.spark.dataSource.register(IvmDataSource)
        super()._opened()
        for name in [*self._tables, *self._views]:
            self._register_in_spark(name)

    @property
    def root(self) -> Path:
        """The state directory."""
        assert self.path is not None
        return self.path

    def _check_mode(self) -> None:
        stored = self._catalog.mode()
        if stored is None:
            if self._catalog.entries() or self._catalog.epoch:
                raise StateError(
                    f"state at {self.path} was created in embedded mode: open it without spark="
                )
            if not self.partitions:
                self.partitions = self.spark.sparkContext.defaultParallelism
            self._catalog.set_mode(MODE, self.partitions)
            return
        mode, partitions = stored
        if self.partitions and self.partitions != partitions:
            raise StateError(
                f"state at {self.path} has {partitions} partitions, fixed when it was created; "
                f"open it with partitions={partitions} (or none), or rebuild it into a new path"
            )
        self.partitions = partitions

    # -- public API --------------------------------------------------------------------------

    def _commit_epoch(self, frames: dict[str, Any], upsert: bool) -> dict[str, str]:
        """Run the epoch on Spark, then commit it on the driver; a failure rolls back every
        partition the epoch touched."""
        ticket = self._ticket(epoch=self.epoch + 1, upsert=upsert)
        self._profile.per_operator = False
        try:
            with self._profile.phase("spark jobs"), quiet_tasks(self.spark):
                changes = self._run_epoch(frames, ticket)
            with self._profile.phase("commit"), self._transaction(ExecutionError):
                self._advance_epoch(changes)
        except BaseException as error:
            # Tasks of this attempt may still run: move the fence first, then roll back.
            write_fence(self.root, f"closed-{ticket.token}")
            try:
                self._recover()
            except Exception as failure:  # noqa: BLE001 - the ingest's error is the one to raise
                error.add_note(f"and rolling back its partitions failed: {failure}")
            translated = translate_error(error)
            if translated is not None:
                raise translated from error
            raise
        return changes

    def explain(self, view: str, analyze: bool = False, format: str = "text") -> str | bytes:
        """The incremental circuit of ``view`` (with ``analyze``, the last epoch's profile:
        per phase and per view; operators run inside the view's Spark job), then its
        Spark stages (a picture for another ``format``: ``Session.explain``)."""
        text = super().explain(view, analyze, format)
        if format != "text":
            return text
        stages = self._stages_of(self._resolve(view))
        lines = [f"  {s.describe()}" for s in stages]
        return "\n".join([text, f"spark stages ({self.partitions} partitions):", *lines])

    # -- plans, tables and views -------------------------------------------------------------

    def _circuit(self, plan: Plan, name: str, join_plan: Any = None) -> Circuit:
        circuit = incrementalize(plan, name, self._describe)
        circuit = optimize(circuit, partitioned=True, join_plan=join_plan,
                           describe=self._describe)
        # view_stages refuses types that Spark cannot carry.
        self._stages[id(circuit)] = (circuit, view_stages(circuit))
        return circuit

    def _register_table(self, table: TableSchema) -> None:
        self._stages[id(table)] = (table, [table_stage(table)])  # refuses types Spark can't carry
        super()._register_table(table)

    def _add_table(self, table: TableSchema) -> None:
        super()._add_table(table)  # the driver's empty copy, for planning and typing
        self._on_commit.append(lambda: self._register_in_spark(table.name))

    def _manifest(self, view: ViewDef) -> Manifest:
        traces = [
            TraceEntry(f"{stage.placement}/{unquote(table)}", columns_of(schema), key)
            for stage in self._stages_of(view.name)
            for table, schema, key in stage_traces(stage)
        ]
        return Manifest.of(STATE_FORMAT, view.circuit.fingerprint, traces)

    def _check_state(self, view: ViewDef, manifest: Manifest) -> None:
        """Every stage of the view has all its partition files (each is created with it)."""
        directory = self._directory(view.name)
        for stage in self._stages_of(view.name):
            expected = self.partitions if stage.partitioned else 1
            found = len(partition_files(directory / stage.name))
            if found != expected:
                raise StateError(
                    f"state at {self.path} is damaged: stage {stage.name} of view "
                    f"{view.name!r} has {found} of its {expected} partition files "
                    f"({directory / stage.name})"
                )

    def _build_view_state(self, view: ViewDef, rebuild: bool = False) -> None:
        """The driver's empty copy of the view, then its stages filled on Spark."""
        trace = self._names.relation_trace(view.name)
        create_trace(self._con, trace, list(columns_of(view.schema)))
        create_reader(self._con, view.name, trace, view.schema.names)
        name = view.name
        directory = self._directory(name)
        if rebuild:  # the files of another plan's state: nothing in them is kept
            shutil.rmtree(directory, ignore_errors=True)
        self._on_rollback.append(lambda: shutil.rmtree(directory, ignore_errors=True))
        ticket = self._ticket(epoch=self.epoch, backfill=True)
        self._jobs.sync()
        epoch = SparkEpoch(self._jobs.spark, self.partitions, ticket, self.failure)
        for source in view.sources:
            epoch.changes[source] = self._live_change(self._jobs.spark, source)
        try:
            output = epoch.run_view(directory, self._stages_of(name), name)
            if output is not None:  # run every stage, without bringing the rows to the driver
                output.write.format("noop").mode("overwrite").save()
        except BaseException as error:
            translated = translate_error(error)
            if translated is not None:
                raise named(translated, name) from error
            raise
        self._catalog.set_manifest(name, self._manifest(view))
        self._on_commit.append(lambda: self._register_in_spark(name))

    def _drop_view_state(self, name: str, manifest: Manifest | None) -> None:
        """The driver's copy goes now; the view's files once the transaction commits."""
        self._con.execute(f"DROP VIEW IF EXISTS {quote(name)}").fetchall()
        self._con.execute(f"DROP TABLE IF EXISTS {self._names.relation_trace(name)}").fetchall()

    def _remove(self, name: str) -> None:
        directory = self._directory(name)
        super()._remove(name)
        # Files go once the drop is committed (a crash before that leaves them in place,
        # and a crash after it leaves a stray directory, removed when a session opens).
        self._on_commit.append(lambda: shutil.rmtree(directory, ignore_errors=True))
        self._on_commit.append(lambda: self.spark.catalog.dropTempView(name))  # the raw name

    def _directory(self, name: str) -> Path:
        """The directory of table or view ``name`` (as the open transaction sees the catalog)."""
        generation = self._catalog.sequence(name)
        if name in self._tables:
            return table_directory(self.root, name, generation)
        return view_directory(self.root, name, generation)

    def _ticket(self, epoch: int, backfill: bool = False, upsert: bool = False) -> Ticket:
        """A ticket for a new ingest attempt (or backfill); only it may write from now on."""
        token = uuid.uuid4().hex
        return Ticket(
            epoch=epoch,
            committed=self.epoch,
            token=token,
            backfill=backfill,
            upsert=upsert,
            settings=tuple(sorted(self.settings.items())),
            fence=str(write_fence(self.root, token)),
            iteration_limit=self.iteration_limit,
        )

    def _compact(self) -> None:
        """Partitions compact their own traces in their tasks; the driver holds none."""

    # -- ingest ------------------------------------------------------------------------------

    def _prepare(self, name: str, batch: Any) -> DataFrame | None:
        """The batch as a normalized change on the wire (None when it has no rows)."""
        table, arrow = self._tables[name], self._arrow_schemas[name]
        struct = spark_struct(table.schema)
        if isinstance(batch, DataFrame):
            # Column names, change format and types are checked here, values on the executors.
            normalize_batch(to_arrow_schema(batch.schema).empty_table(), table, arrow)
            return self._jobs.adopt(batch).mapInArrow(
                functools.partial(normalize_task, table, arrow, dict(self.settings)), struct
            )
        change = normalize_batch(batch, table, arrow)
        if change.num_rows == 0:
            return None
        self._con.register("__ivm_batch", change)
        try:
            wire = self._con.sql(to_wire_sql("SELECT * FROM __ivm_batch", table.schema))
            wire_table = conform(wire.to_arrow_table(), arrow_schema(table.schema))
        finally:
            self._con.unregister("__ivm_batch")
        return self._jobs.spark.createDataFrame(wire_table, schema=struct)

    def _run_epoch(self, frames: dict[str, DataFrame | None], ticket: Ticket) -> dict[str, str]:
        """Run the epoch as one Spark job; returns the changed views' changes (driver temp
        tables)."""
        self._task_times.value = {}
        self._jobs.sync()
        epoch = SparkEpoch(
            self._jobs.spark, self.partitions, ticket, self.failure, self._task_times
        )
        tables = [
            TableRun(name, stage, self._directory(name), frame)
            for name, frame in frames.items()
            if frame is not None
            for stage in self._stages_of(name)
        ]
        views = [
            ViewRun(v.name, self._stages_of(v.name), self._directory(v.name), v.schema,
                    frozenset(v.sources))
            for v in self._views.values()
        ]
        try:
            collected = run_epoch(epoch, tables, views)
        except BaseException as error:
            translated = translate_error(error)
            view = failed_view(error)
            if translated is None or isinstance(translated, StateError) or view is None:
                raise
            raise named(translated, view) from error
        times = self._task_times.value
        changed: dict[str, str] = {}
        for name, change in collected.items():
            self._profile.views[name] = times.get(name, (0.0, 0))[0]
            changed[name] = self._collect(name, change)
        return {name: changed[name] for name in self._views if name in changed}

    def _collect(self, view: str, collected: pa.Table) -> str:
        """Keep a view's change (wire) on the driver with DuckDB types; returns its temp table."""
        schema = self._views[view].schema
        scratch = self._names.change(view)
        self._con.register("__ivm_collected", collected)
        try:
            self._con.execute(
                f"CREATE OR REPLACE TEMP TABLE {scratch} AS "
                f"{from_wire_sql('SELECT * FROM __ivm_collected', schema)}"
            ).fetchall()
        finally:
            self._con.unregister("__ivm_collected")
        return scratch

    def _recover(self) -> None:
        """Roll back every partition that applied an epoch the driver did not commit."""
        for directory in (self.root / "tables", self.root / "views"):
            for file in sorted(directory.glob("**/part-*.duckdb")):
                roll_back_ahead(file, self.epoch)

    def _remove_strays(self) -> None:
        """Remove the directories of tables and views the catalog does not hold (a DDL
        that a dead driver never committed, or a committed drop it never cleaned up)."""
        expected = {self._directory(n) for n in [*self._tables, *self._views]}
        for directory in stray_directories(self.root, expected):
            shutil.rmtree(directory, ignore_errors=True)

    def _stages_of(self, name: str) -> list[Stage]:
        """The stages of table or view ``name`` as it is now."""
        source: object = (
            self._tables[name] if name in self._tables else self._views[name].circuit
        )
        cached = self._stages.get(id(source))
        if cached is None or cached[0] is not source:
            raise StateError(f"no Spark stages for {name!r}")  # pragma: no cover
        return cached[1]
