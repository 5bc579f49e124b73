"""The embedded executor: runs circuits one epoch at a time on one DuckDB connection.

For each operator it builds the SQL of the operator's change (``delta``) and of
its integral before the epoch (``old``). Linear operators are composed into
their consumer's SQL, so a chain of filters and projections costs nothing of
its own; stateful operators materialize their change in a scratch table,
because the change is both read by the operator above and appended to state.

All appends to state are collected in ``commits`` (target table, rows) and run after every view of
the epoch has computed its change: until then every trace still holds the
integral *before* the epoch, which is what the delta rules read as "old".

In *backfill* mode (a view created over existing data) each source's change is
its whole current contents (its trace, unless ``changes`` gives it) and its old
integral is empty, so the same code computes the initial contents and creates
and fills the state.
"""

from __future__ import annotations

from collections.abc import Mapping

import duckdb

from ivm.circuit.circuit import (
    Circuit,
    DeltaJoin,
    IncrementalAggregate,
    IncrementalDistinct,
    Linear,
    Operator,
    Source,
)
from ivm.errors import ExecutionError
from ivm.execution.state import StateStore
from ivm.operators import aggregate, distinct
from ivm.operators.join import delta_join_sql
from ivm.plan.nodes import Filter, Join, Project
from ivm.plan.sql import (
    W,
    column_list,
    consolidate_sql,
    empty_relation,
    filter_sql,
    join_sql,
    project_sql,
    union_all_sql,
)
from ivm.schema import Column, Schema
from ivm.storage.traces import create_trace


def run_sql(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Execute one statement, turning DuckDB's errors into ``ExecutionError``."""
    try:
        con.execute(sql).fetchall()
    except duckdb.Error as error:
        raise ExecutionError(f"evaluating a view failed: {error}") from error


def describe(con: duckdb.DuckDBPyConnection, sql: str) -> Schema:
    """The schema DuckDB gives ``sql`` (nothing is executed)."""
    rows = con.execute(f"DESCRIBE {sql}").fetchall()
    return Schema(tuple(Column(r[0], r[1]) for r in rows))


class EpochRunner:
    """Computes the changes of circuits for one epoch, collecting state appends."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        store: StateStore,
        changes: Mapping[str, str],
        backfill: bool = False,
    ) -> None:
        self.con = con
        self.store = store
        self.changes = changes
        self.backfill = backfill
        self.commits: list[tuple[str, str]] = []  # (trace table, query of rows to append)
        self._delta: dict[tuple[str, int], str | None] = {}
        self._old: dict[tuple[str, int], str] = {}
        self._view = ""

    def run(self, circuit: Circuit) -> str | None:
        """SQL of the view's change this epoch (not consolidated), or None if unchanged."""
        self._view = circuit.view
        return self.delta(circuit.output)

    # -- changes -----------------------------------------------------------------------------

    def delta(self, op: Operator) -> str | None:
        key = (self._view, op.index)
        if key not in self._delta:
            self._delta[key] = self._compute_delta(op)
        return self._delta[key]

    def _compute_delta(self, op: Operator) -> str | None:
        if isinstance(op, Source):
            if self.backfill and op.name not in self.changes:
                return self._trace_of(op)
            return self.changes.get(op.name)
        if isinstance(op, Linear):
            return self._linear([self.delta(i) for i in op.inputs], op)
        if isinstance(op, DeltaJoin):
            node = op.node
            assert isinstance(node, Join)
            return delta_join_sql(
                [self.delta(i) for i in op.inputs],
                [self.old(i) for i in op.inputs],
                [i.node.schema for i in op.inputs],
                node.condition,
            )
        if isinstance(op, IncrementalAggregate):
            return self._aggregate(op)
        if isinstance(op, IncrementalDistinct):
            return self._distinct(op)
        raise TypeError(f"no executor for {type(op).__name__}")  # pragma: no cover

    def _linear(self, inputs: list[str | None], op: Operator) -> str | None:
        node = op.node
        present = [s for s in inputs if s is not None]
        if not present:
            return None
        if isinstance(node, Filter):
            return filter_sql(present[0], node.predicate)
        if isinstance(node, Project):
            return project_sql(present[0], node.exprs, weighted=True)
        return present[0] if len(present) == 1 else union_all_sql(present)

    def _aggregate(self, op: IncrementalAggregate) -> str | None:
        change = self.delta(op.inputs[0])
        if change is None:
            return None
        shape = op.shape
        if shape.recomputed:
            change = self._materialize(op, "input", change)
        state = self.store.operator_trace(self._view, op.index)
        if self.backfill:
            partials = describe(self.con, aggregate.partials_sql(shape, change))
            self._create(state, aggregate.state_schema(shape, partials))
        step = aggregate.aggregate_step_sql(shape, change, state, self.old(op.inputs[0]))
        versions = self._materialize(op, "versions", step)
        self.commits.append((state, versions))
        return aggregate.visible_sql(shape, versions)

    def _distinct(self, op: IncrementalDistinct) -> str | None:
        change = self.delta(op.inputs[0])
        if change is None:
            return None
        names = op.node.schema.names
        consolidated = self._materialize(op, "input", consolidate_sql(change, names))
        trace = self.store.operator_trace(self._view, op.index)
        if self.backfill:
            self._create(trace, op.node.schema)
        self.commits.append((trace, consolidated))
        return self._materialize(
            op, "output", distinct.distinct_step_sql(names, consolidated, trace)
        )

    # -- integrals before the epoch ----------------------------------------------------------

    def old(self, op: Operator) -> str:
        key = (self._view, op.index)
        if key not in self._old:
            self._old[key] = self._compute_old(op)
        return self._old[key]

    def _compute_old(self, op: Operator) -> str:
        if isinstance(op, Source):
            if self.backfill:
                return empty_relation(op.node.schema)
            return self._trace_of(op)
        if isinstance(op, Linear):
            result = self._linear([self.old(i) for i in op.inputs], op)
            assert result is not None
            return result
        if isinstance(op, DeltaJoin):
            node = op.node
            assert isinstance(node, Join)
            return join_sql(
                [self.old(i) for i in op.inputs],
                [i.node.schema for i in op.inputs],
                node.condition,
                weighted=True,
            )
        if self.backfill:
            return empty_relation(op.node.schema)
        trace = self.store.operator_trace(self._view, op.index)
        if isinstance(op, IncrementalAggregate):
            return aggregate.snapshot_sql(op.shape, trace)
        if isinstance(op, IncrementalDistinct):
            return distinct.snapshot_sql(op.node.schema.names, trace)
        raise TypeError(f"no integral for {type(op).__name__}")  # pragma: no cover

    # -- helpers -----------------------------------------------------------------------------

    def _trace_of(self, op: Source) -> str:
        names = op.node.schema.names
        return f"SELECT {column_list(names)}, {W} FROM {self.store.relation_trace(op.name)}"

    def _materialize(self, op: Operator, part: str, sql: str) -> str:
        table = self.store.scratch(self._view, op.index, part)
        run_sql(self.con, f"CREATE OR REPLACE TEMP TABLE {table} AS {sql}")
        return f"SELECT * FROM {table}"

    def _create(self, table: str, schema: Schema) -> None:
        try:
            create_trace(self.con, table, [(c.name, c.type) for c in schema.columns])
        except duckdb.Error as error:
            raise ExecutionError(f"cannot create state table {table}: {error}") from error
