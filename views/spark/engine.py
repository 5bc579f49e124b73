"""Spark mode's engine: the session's API, each epoch run on Spark over partition files.

The driver keeps the catalog and the epoch in ``<path>/ivm.duckdb`` (with empty copies of
every relation, so views are planned and typed exactly as in embedded mode). Contents and
state live in partition files (``ivm.storage.partitions``), written only by Spark tasks
(``ivm.execution.spark.executor``); what the driver collects is held to the memory limit.

An ingest is one epoch:

1. each batch becomes a DataFrame (Spark DataFrames are normalized on the executors)
   and goes through its table's stage, which checks it against the stored rows and
   appends it;
2. every affected view runs its stages (a view reading another view reads that view's
   change of the same epoch); 1 and 2 are one Spark job (``ivm.execution.spark.epoch_job``);
3. only when every stage succeeded does the driver commit the epoch.

Each task carries the epoch, the last committed epoch and a token naming this ingest
attempt: a task Spark retries re-emits what its first attempt stored, and a partition
that applied an epoch which was never committed rolls it back (right away when the
ingest fails, when the session opens, and at the latest when a task next touches it:
``ivm.views.spark.recovery``).

The session (``views.session``) holds the catalog and this engine, which implements
``views.engine.Engine`` for Spark. Each table and view is registered in the Spark SQL
catalog (a temporary view over the ``ivm`` data source, ``ivm.views.spark.source``);
reads live in ``ivm.views.spark.reads``, batch conversion in ``ivm.views.spark.batches``.
A view's manifest lists its stages' traces, each ``<stage>/<table>``; stage directories
are named by their operator's fingerprint, so a rebuilt view never reads another plan's.
"""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import SparkSession as PySparkSession

from ivm import faults
from ivm.circuit.circuit import Circuit
from ivm.circuit.incrementalize import incrementalize
from ivm.errors import ExecutionError, IvmError, ResourceError, StateError
from ivm.execution.spark.epoch_job import TableRun, ViewRun, run_epoch
from ivm.execution.spark.executor import SparkEpoch, translate_error
from ivm.execution.spark.job_session import JobSession
from ivm.execution.spark.refusals import Refusals
from ivm.execution.spark.stage_task import Ticket, stage_traces
from ivm.execution.spark.stages import Stage, table_stage, view_stages
from ivm.execution.spark.tasks import FailurePoint, TaskTimes, failed_view
from ivm.execution.spark.wire import from_wire_sql
from ivm.operators.base import STATE_FORMAT
from ivm.passes import optimize
from ivm.passes.cyclic_joins import JoinPlan
from ivm.plan.node import Plan
from ivm.schema import TableSchema, quote
from ivm.storage.manifest import Manifest, TraceEntry
from ivm.storage.partitions import partition_files, table_directory, view_directory, write_fence
from ivm.storage.sqltext import unquote
from ivm.storage.traces import create_reader, create_trace
from ivm.views import resources as limits
from ivm.views.definitions import ViewDef
from ivm.views.diagnose import named
from ivm.views.spark import reads, recovery
from ivm.views.spark.batches import prepare
from ivm.views.spark.profiling import record_stages
from ivm.views.spark.quiet import quiet_tasks
from ivm.views.spark.source import IvmDataSource
from ivm.views.spark.workers import check_workers
from ivm.views.view_state import columns_of

if TYPE_CHECKING:
    from ivm.views.session import Session

MODE = "spark"


class SparkEngine:
    """The engine of a Spark-mode session (``views.engine.Engine``; module docstring)."""

    mode = MODE
    saves_indexes = False  # its state directory holds partitions; its epochs keep no memory

    def __init__(
        self, session: Session, spark: PySparkSession, partitions: int | None = None
    ) -> None:
        if session.path is None:
            raise StateError(
                "Spark mode keeps its state in files: pass a path every executor can reach "
                "(a shared filesystem on a cluster)"
            )
        if partitions is not None and (not isinstance(partitions, int) or partitions < 1):
            raise IvmError(f"partitions must be a positive integer, not {partitions!r}")
        check_workers(spark)
        self.session = session
        self.spark = spark
        self._jobs = JobSession(spark)  # where epochs run: the same SparkContext, AQE off
        self.partitions: int | None = partitions or 0  # settled by check_mode
        self.failure: FailurePoint | None = None  # test hook: make chosen tasks fail
        # Stage tasks add their seconds and rows here, by stage (``views.spark.profiling``).
        self.task_times = spark.sparkContext.accumulator({}, TaskTimes())
        self.refusals = spark.sparkContext.accumulator([], Refusals())  # tasks' (refusals)
        # Stages by the circuit (or table schema) object they were cut from: a view
        # replaced or a DDL rolled back leaves a stale entry, never a wrong one.
        self._stages: dict[int, tuple[object, list[Stage]]] = {}
        self.opened_at = 0.0  # when the session opened (``opening``)

    @property
    def root(self) -> Path:
        """The state directory."""
        assert self.session.path is not None
        return self.session.path

    # -- opening -----------------------------------------------------------------------------

    def check_mode(self) -> None:
        """Refuse state embedded mode created; settle the partition count."""
        s = self.session
        stored = s._catalog.mode()
        if stored is None:
            if s._catalog.entries() or s._catalog.epoch:
                raise StateError(
                    f"state at {s.path} was created in embedded mode: open it without spark="
                )
            if not self.partitions:
                self.partitions = self.spark.sparkContext.defaultParallelism
            s._catalog.set_mode(MODE, self.partitions)
            return
        mode, partitions = stored
        if self.partitions and self.partitions != partitions:
            raise StateError(
                f"state at {s.path} has {partitions} partitions, fixed when it was created; "
                f"open it with partitions={partitions} (or none), or rebuild it into a new path"
            )
        self.partitions = partitions

    def opening(self) -> None:
        """Recover partitions a dead driver left ahead (before rebuilds run)."""
        self.opened_at = time.time()  # files written after it are checked at close
        write_fence(self.root, "opened")  # no task of an earlier session may write now
        self.recover()
        recovery.remove_strays(self)
        self.spark.dataSource.register(IvmDataSource)

    def opened(self) -> None:
        """Register every table and view in the Spark SQL catalog."""
        for name in [*self.session._tables, *self.session._views]:
            self.publish(name)

    # -- plans, tables and views -------------------------------------------------------------

    def circuit(self, plan: Plan, name: str, join_plan: JoinPlan | None) -> Circuit:
        """The incremental circuit for a view's plan, partitioned; its stages cut."""
        circuit = incrementalize(plan, name, self.session._describe)
        circuit = optimize(circuit, partitioned=True, join_plan=join_plan,
                           describe=self.session._describe)
        # view_stages refuses types that Spark cannot carry.
        self._stages[id(circuit)] = (circuit, view_stages(circuit))
        return circuit

    def table_registered(self, table: TableSchema) -> None:
        """The table's stage (refusing types Spark cannot carry)."""
        self._stages[id(table)] = (table, [table_stage(table)])

    def publish(self, name: str) -> None:
        """Register table or view ``name`` in the Spark SQL catalog (unless dropped since)."""
        reads.register_in_spark(self, name)

    def manifest(self, view: ViewDef) -> Manifest:
        """The manifest of the view's stages' traces, each ``<stage>/<table>``."""
        traces = [
            TraceEntry(f"{stage.placement}/{unquote(table)}", columns_of(schema), key)
            for stage in self.stages_of(view.name)
            for table, schema, key in stage_traces(stage)
        ]
        return Manifest.of(STATE_FORMAT, view.circuit.fingerprint, traces)

    def check_state(self, view: ViewDef, manifest: Manifest) -> None:
        """Every stage of the view has all its partition files (each is created with it)."""
        directory = self.directory(view.name)
        for stage in self.stages_of(view.name):
            expected = self.partitions if stage.partitioned else 1
            found = len(partition_files(directory / stage.name))
            if found != expected:
                raise StateError(
                    f"state at {self.session.path} is damaged: stage {stage.name} of view "
                    f"{view.name!r} has {found} of its {expected} partition files "
                    f"({directory / stage.name})"
                )

    def build_view_state(self, view: ViewDef, rebuild: bool = False) -> None:
        """The driver's empty copy of the view, then its stages filled on Spark."""
        s = self.session
        trace = s._names.relation_trace(view.name)
        create_trace(s._con, trace, list(columns_of(view.schema)))
        create_reader(s._con, view.name, trace, view.schema.names)
        name = view.name
        directory = self.directory(name)
        if rebuild:  # the files of another plan's state: nothing in them is kept
            shutil.rmtree(directory, ignore_errors=True)
        s._on_rollback.append(lambda: shutil.rmtree(directory, ignore_errors=True))
        ticket = self._ticket(epoch=s.epoch, backfill=True)
        epoch = self._epoch(ticket)
        for source in view.sources:
            epoch.changes[source] = reads.live_change(self, self._jobs.spark, source)
        try:
            output = epoch.run_view(directory, self.stages_of(name), name)
            if output is not None:  # run every stage, without bringing the rows to the driver
                epoch.act(output.write.format("noop").mode("overwrite").save)
        except BaseException as error:
            translated = translate_error(error)
            if translated is not None:
                subject = limits.view_subject(name, True)
                resource = limits.as_resource(translated, subject, s._budget)
                raise resource or named(translated, name) from error
            raise
        faults.reached("spark.backfilled")
        s._catalog.set_manifest(name, self.manifest(view))
        s._on_commit.append(lambda: self.publish(name))

    def drop_view_state(self, name: str, manifest: Manifest | None) -> None:
        """The driver's copy goes now; the view's files once the transaction commits."""
        s = self.session
        s._con.execute(f"DROP VIEW IF EXISTS {quote(name)}").fetchall()
        s._con.execute(f"DROP TABLE IF EXISTS {s._names.relation_trace(name)}").fetchall()

    def removing(self, name: str) -> None:
        """Table or view ``name``'s files go once the drop is committed (a crash before that
        leaves them in place, and a crash after it leaves a stray directory, removed when a
        session opens); so does its name in the Spark catalog."""
        directory = self.directory(name)
        on_commit = self.session._on_commit
        on_commit.append(lambda: shutil.rmtree(directory, ignore_errors=True))
        on_commit.append(lambda: self.spark.catalog.dropTempView(name))  # the raw name

    def directory(self, name: str) -> Path:
        """The directory of table or view ``name`` (as the open transaction sees the catalog)."""
        made = table_directory if name in self.session._tables else view_directory
        return made(self.root, name, self.session._catalog.sequence(name))

    def _ticket(self, epoch: int, backfill: bool = False, upsert: bool = False) -> Ticket:
        """A ticket for a new ingest attempt (or backfill); only it may write from now on."""
        s = self.session
        token = uuid.uuid4().hex
        return Ticket(
            epoch=epoch,
            committed=s.epoch,
            token=token,
            backfill=backfill,
            upsert=upsert,
            settings=tuple(sorted(s.settings.items())),
            fence=str(write_fence(self.root, token)),
            iteration_limit=s.iteration_limit,
            memory_limit=s._budget.limit if s._budget.explicit else None,
            armed=faults.for_tasks(),
        )

    # -- epochs ------------------------------------------------------------------------------

    def _epoch(self, ticket: Ticket, times: Any = None) -> SparkEpoch:
        """A new epoch (or backfill) on ivm's Spark session, synced; tasks' refusals kept."""
        self._jobs.sync()
        partitions = self.partitions or 1  # settled by check_mode
        return SparkEpoch(self._jobs.spark, partitions, ticket, self.failure, times,
                          self.refusals)

    def prepare(self, name: str, batch: Any) -> DataFrame | None:
        """The batch as a normalized change on the wire (None when it has no rows); an
        Arrow batch, on the driver, is checked against the memory limit first."""
        limits.check_batches(self.session, {name: batch})
        return prepare(self.session, self._jobs, name, batch, self.refusals)

    def commit_epoch(self, batches: dict[str, Any], upsert: bool) -> dict[str, str]:
        """Run the epoch on Spark, then commit it on the driver; a failure rolls back every
        partition the epoch touched."""
        s = self.session
        ticket = self._ticket(epoch=s.epoch + 1, upsert=upsert)
        s._profile.per_operator = False
        try:
            faults.reached("spark.epoch")
            with s._profile.phase("spark jobs"), quiet_tasks(self.spark):
                changes = self._run_epoch(batches, ticket)
            faults.reached("spark.collected")
            with s._profile.phase("commit"), s._transaction(ExecutionError):
                s._advance_epoch(changes)
        except BaseException as error:
            # Tasks of this attempt may still run: move the fence first, then roll back.
            write_fence(self.root, f"closed-{ticket.token}")
            try:
                self.recover()
            except Exception as failure:  # noqa: BLE001 - the ingest's error is the one to raise
                error.add_note(f"and rolling back its partitions failed: {failure}")
            translated = translate_error(error) or limits.epoch_resource(
                s, error, limits.task_subject(None, batches))  # the driver's own memory
            if translated is not None and translated is not error:
                raise translated from error
            raise
        return changes

    def compact(self) -> None:
        """Partitions compact their own traces in their tasks; the driver holds none."""

    def closing(self) -> None:
        """Rewrite the partition files written since the open whose free blocks have grown
        (``views.spark.recovery``); no task writes once an epoch closed the fence."""
        recovery.rewrite_sparse(self, self.opened_at)

    def _run_epoch(self, frames: dict[str, DataFrame | None], ticket: Ticket) -> dict[str, str]:
        """Run the epoch as one Spark job; returns the changed views' changes (temp tables)."""
        s = self.session
        self.task_times.value = {}
        epoch = self._epoch(ticket, self.task_times)
        tables = [
            TableRun(name, stage, self.directory(name), frame)
            for name, frame in frames.items()
            if frame is not None
            for stage in self.stages_of(name)
        ]
        views = [
            ViewRun(v.name, self.stages_of(v.name), self.directory(v.name), v.schema,
                    frozenset(v.sources))
            for v in s._views.values()
        ]
        try:
            collected = run_epoch(epoch, tables, views, limits.collecting(s))
        except ResourceError:  # the driver's own limit: named already
            raise
        except BaseException as error:
            translated = translate_error(error)
            view = failed_view(error)
            subject = limits.task_subject(view, frames)
            resource = limits.as_resource(translated or error, subject, s._budget, text=str(error))
            if resource is not None:
                raise resource from error
            if translated is None or isinstance(translated, StateError) or view is None:
                raise
            raise named(translated, view) from error
        record_stages(s, self.task_times.value, collected)  # each stage's rows and time
        changed = {name: self._collect(name, change) for name, change in collected.items()}
        return {name: changed[name] for name in s._views if name in changed}

    def _collect(self, view: str, collected: pa.Table) -> str:
        """Keep a view's change (wire) on the driver with DuckDB types; returns its temp table."""
        s = self.session
        schema = s._views[view].schema
        scratch = s._names.change(view)
        s._con.register("__ivm_collected", collected)
        try:
            s._con.execute(
                f"CREATE OR REPLACE TEMP TABLE {scratch} AS "
                f"{from_wire_sql('SELECT * FROM __ivm_collected', schema)}"
            ).fetchall()
        finally:
            s._con.unregister("__ivm_collected")
        return scratch

    def recover(self) -> None:
        """Roll back every partition that applied an epoch the driver did not commit."""
        recovery.recover(self)

    def stages_of(self, name: str) -> list[Stage]:
        """The stages of table or view ``name`` as it is now."""
        s = self.session
        source: object = s._tables[name] if name in s._tables else s._views[name].circuit
        cached = self._stages.get(id(source))
        if cached is None or cached[0] is not source:
            raise StateError(f"no Spark stages for {name!r}")  # pragma: no cover
        return cached[1]

    # -- reads -------------------------------------------------------------------------------

    def read(self, name: str) -> pa.Table:
        """A view's (or table's) contents from its files, after the epoch in flight."""
        return reads.read(self, name)

    def sql(self, query: str) -> pa.Table:
        """A read-only query over tables and views (their files), as ``read`` does."""
        return reads.sql(self, query)

    def live_sql(self, name: str) -> str:
        """The table's live rows, read from its files into the driver (``views.arrival``)."""
        return reads.live_sql(self, name)

    def dataframe(self, name: str) -> DataFrame:
        """The current contents of a table or view as a Spark DataFrame (read when used)."""
        return reads.frame(self, name)

    def explain_tail(self, view: str) -> str | None:
        """The view's Spark stages, one a line."""
        lines = [f"  {stage.describe()}" for stage in self.stages_of(view)]
        return "\n".join([f"spark stages ({self.partitions} partitions):", *lines])

    def stages(self, view: str) -> list[tuple[str, Any]]:
        """The view's Spark stages for a plan picture, each (description, produces)."""
        return [(stage.describe(), stage.produces) for stage in self.stages_of(view)]
