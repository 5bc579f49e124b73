"""What a session asks of the engine of its mode: the points where embedded and Spark differ.

A ``Session`` holds its catalog and state (tables, views, the epoch, the open
transaction) and one engine: ``EmbeddedEngine`` (``views.embedded``: every trace in the
session's DuckDB database, epochs run there) or ``SparkEngine`` (``views.spark.engine``:
contents and state in partition files, epochs run as Spark jobs). Everything else a
session does (DDL, checks, changefeeds, explain's circuit, stats) is the same in both
modes and never asks which mode it is in, except through ``mode`` where a feature exists
differently by mode (ALTER TABLE), or in one mode only (``serve``, streamed loads).

An engine is built for one session (``Engine(session)``) and reads the session's
catalog and open transaction through it: its methods run inside the transaction the
session opened, and defer what must wait for the commit to ``session._on_commit``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

from ivm.circuit.circuit import Circuit
from ivm.passes.cyclic_joins import JoinPlan
from ivm.plan.node import Plan
from ivm.schema import TableSchema
from ivm.storage.manifest import Manifest
from ivm.views.definitions import ViewDef


class Engine(Protocol):
    """The part of a session that depends on its mode (see the module docstring)."""

    mode: str
    """``"embedded"`` or ``"spark"``."""
    saves_indexes: bool
    """Whether a clean close saves the in-memory indexes (``views.saved_indexes``)."""
    spark: Any
    """The SparkSession epochs run on (None in embedded mode)."""
    partitions: int | None
    """How many partitions the state has (None in embedded mode)."""
    failure: Any
    """Test hook: tasks made to fail (``FailurePoint``; Spark mode)."""

    # -- opening -----------------------------------------------------------------------------

    def check_mode(self) -> None:
        """Refuse state the other mode created (and settle this mode's settings)."""
        ...

    def opening(self) -> None:
        """After the catalog is loaded, before an upgrade or a rebuild runs: make the stored
        state consistent (Spark: roll back partitions a dead driver left ahead)."""
        ...

    def opened(self) -> None:
        """After the session is open: publish every table and view (Spark: its catalog)."""
        ...

    # -- tables and views --------------------------------------------------------------------

    def circuit(self, plan: Plan, name: str, join_plan: JoinPlan | None) -> Circuit:
        """The incremental circuit this mode runs for a view's plan."""
        ...

    def table_registered(self, table: TableSchema) -> None:
        """A base table joins the catalog (at open or by CREATE TABLE)."""
        ...

    def publish(self, name: str) -> None:
        """Make a committed table or view readable outside ivm (Spark: its catalog)."""
        ...

    def manifest(self, view: ViewDef) -> Manifest:
        """The manifest of the state the view keeps today."""
        ...

    def check_state(self, view: ViewDef, manifest: Manifest) -> None:
        """Every part of the state ``manifest`` lists is there; else StateError."""
        ...

    def build_view_state(self, view: ViewDef, rebuild: bool = False) -> None:
        """Create the view's state and fill it from its inputs (inside the transaction)."""
        ...

    def drop_view_state(self, name: str, manifest: Manifest | None) -> None:
        """Drop a view's state (inside the transaction)."""
        ...

    def removing(self, name: str) -> None:
        """Table or view ``name`` is about to be dropped (inside the transaction)."""
        ...

    # -- epochs ------------------------------------------------------------------------------

    def prepare(self, name: str, batch: Any) -> Any:
        """One table's batch made ready to apply (None or an empty table: no rows)."""
        ...

    def commit_epoch(self, batches: dict[str, Any], upsert: bool) -> dict[str, str]:
        """Apply one epoch and commit it; returns the driver tables holding each changed
        view's change. Nothing is applied if it fails."""
        ...

    def compact(self) -> None:
        """After an epoch committed: compact the traces that are due."""
        ...

    def closing(self) -> None:
        """At a clean close, before the state's connection closes (Spark: the partition
        files written since the open rewritten if their free blocks have grown)."""
        ...

    # -- reads -------------------------------------------------------------------------------

    def read(self, name: str) -> pa.Table:
        """The current contents of an existing table or view, one row per copy."""
        ...

    def sql(self, query: str) -> pa.Table:
        """A checked read-only query over the tables and views."""
        ...

    def live_sql(self, name: str) -> str:
        """SQL over the session's connection reading a table's live rows this epoch."""
        ...

    def dataframe(self, name: str) -> Any:
        """An existing table or view as a Spark DataFrame (Spark mode)."""
        ...

    def directory(self, name: str) -> Path | None:
        """Where a table's or view's own files are (Spark mode; None: in the database)."""
        ...

    def explain_tail(self, view: str) -> str | None:
        """What ``explain`` says of the view after its circuit in this mode (or None)."""
        ...

    def stages(self, view: str) -> list[tuple[str, Any]]:
        """The view's Spark stages for a plan picture, each (description, produces)."""
        ...
