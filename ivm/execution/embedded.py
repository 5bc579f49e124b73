"""The embedded executor: runs circuits one epoch at a time on one DuckDB connection.

``EpochRunner`` is the ``Run`` operators compute against (``ivm.operators.base``):
it memoizes each operator's change and integral as SQL text, so linear
operators compose into their consumer's SQL and cost nothing of their own;
stateful operators materialize what they need in scratch tables.

All appends to state are collected in ``commits`` (target table, rows) and run
after every view of the epoch has computed its change: until then every trace
still holds the integral *before* the epoch, which is what the delta rules read
as "old".

In *backfill* mode (a view created over existing data) each source's change is
its whole current contents (its trace, unless ``changes`` gives it) and its old
integral is empty, and a constant (a VALUES list) emits its rows (``Run.backfill``,
which ``backfill`` answers); the view's traces start empty (``create_traces``), so the
same code computes the initial contents and fills the state.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from ivm import faults
from ivm.circuit.circuit import Circuit
from ivm.execution.arrangements import Arrangements
from ivm.execution.failures import construct_of, sql_failure
from ivm.execution.profile import EpochProfile
from ivm.execution.registrations import Registrations
from ivm.execution.state import StateStore
from ivm.operators.base import At, Operator
from ivm.operators.reads import read_sql
from ivm.plan.sql import W, column_list, empty_relation
from ivm.schema import Column, Schema, quote
from ivm.storage.results import fetch_arrow
from ivm.storage.traces import create_trace

DEFAULT_ITERATION_LIMIT = 1000
"""Iterations a recursive view may take in one epoch unless the session says otherwise."""


def run_sql(
    con: duckdb.DuckDBPyConnection, sql: str, view: str = "", op: Operator | None = None
) -> int:
    """Execute one statement; returns the rows it wrote (DuckDB's count for CREATE TABLE
    AS, INSERT…; else 0). DuckDB's errors become ``ExecutionError`` when a value is at
    fault, else ``InternalError`` naming ``view`` and the construct ``op`` maintains
    (``ivm.execution.failures``)."""
    faults.reached("operator.sql")
    try:
        result = con.execute(sql).fetchall()
    except duckdb.Error as error:
        construct = construct_of(op) if op is not None else ""
        raise sql_failure(error, view, construct) from error
    first = result[0][0] if result and result[0] else None
    return first if isinstance(first, int) else 0


def describe(con: duckdb.DuckDBPyConnection, sql: str) -> Schema:
    """The schema DuckDB gives ``sql`` (nothing is executed)."""
    rows = con.execute(f"DESCRIBE {sql}").fetchall()
    return Schema(tuple(Column(r[0], r[1]) for r in rows))


def create_traces(con: duckdb.DuckDBPyConnection, store: StateStore, circuit: Circuit) -> None:
    """Create every (empty) trace the circuit's operators keep."""
    for op, spec in circuit.traces():
        table = store.operator_trace(circuit.view, op.fingerprint, spec.role)
        try:
            create_trace(con, table, [(c.name, c.type) for c in spec.schema.columns])
        except duckdb.Error as error:
            raise sql_failure(
                error, circuit.view, construct_of(op), f"creating state table {table}"
            ) from error
    faults.reached("ddl.traces")


OperatorMemory = dict[tuple[str, str], dict[str, Any]]
"""What a session keeps in memory per operator (``Run.memory``), by (view, fingerprint)."""


class EpochRunner:
    """Computes the changes of circuits for one epoch, collecting state appends."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        store: StateStore,
        changes: Mapping[str, str],
        backfill: bool = False,
        profile: EpochProfile | None = None,
        iteration_limit: int = DEFAULT_ITERATION_LIMIT,
        epoch: int = 0,
        memory: OperatorMemory | None = None,
        arrangements: Arrangements | None = None,
        registered: Registrations | None = None,
        warming: bool = False,
    ) -> None:
        self.con = con
        self.warming = warming
        """A dry epoch over empty changes that only builds the arrangements the circuits
        read (``views.warmup``): a change with no rows still flows to the operators above
        it, so that each reads its state at (no) keys."""
        self.arrangements = None if backfill else arrangements
        self.slices = Registrations(con) if registered is None else registered
        """The Arrow tables registered with DuckDB for this epoch's reads: the owner
        releases them once the epoch's transaction is over (``release``)."""
        self._memory = memory
        self.after_commit_actions: list[Callable[[], None]] = []
        self.iteration_limit = iteration_limit
        self.epoch = epoch
        self.profile = profile
        self.store = store
        self.changes = changes
        self.backfill = backfill
        self.commits: list[tuple[str, str]] = []  # (trace table, query of rows to append)
        self.empty: set[str] = set()  # SQL reading scratch tables that hold no rows
        self._change: dict[tuple[str, str], str | None] = {}
        self._integral: dict[tuple[str, str], str] = {}
        self._schemas: dict[tuple[str, str], Schema] = {}
        self._view = ""

    def run(self, circuit: Circuit) -> str | None:
        """SQL of the view's change this epoch (not consolidated), or None if unchanged."""
        self._view = circuit.view
        return self.change(circuit.output)

    # -- the Run interface -------------------------------------------------------------------

    def change(self, op: Operator) -> str | None:
        key = (self._view, op.fingerprint)
        if key not in self._change:
            faults.reached("operator", op.kind)
            change = op.change(self)
            # A change materialized with no rows is no change: operators above skip it.
            skipped = change in self.empty and not self.warming
            self._change[key] = None if skipped else change
            if self.profile is not None and self._change[key] is not None:
                self.profile.changed.add(key)
        return self._change[key]

    def integral(self, op: Operator) -> str:
        key = (self._view, op.fingerprint)
        if key not in self._integral:
            self._integral[key] = op.integral(self)
        return self._integral[key]

    def source_change(self, name: str, schema: Schema) -> str | None:
        if self.backfill and name not in self.changes:
            return self._relation(name, schema)
        return self.changes.get(name)

    def source_integral(self, name: str, schema: Schema, at: At | None = None) -> str:
        if self.backfill:
            return empty_relation(schema)
        return self._read(self.store.relation_trace(name), schema.names, at, False)

    def read(self, op: Operator, role: str, at: At | None = None, live: bool = False) -> str:
        table = self.store.operator_trace(self._view, op.fingerprint, role)
        return self._read(table, self._trace_schema(op, role).names, at, live)

    def _read(self, table: str, names: Sequence[str], at: At | None, live: bool) -> str:
        """SQL of a read of trace ``table``: at keys, from its arrangement when the session
        keeps them (an Arrow table registered for this epoch), else from the table."""
        if at is None or self.arrangements is None:
            return read_sql(f"SELECT * FROM {table}", names, at, live)
        start = time.perf_counter()
        rows, exact = self.arrangements.lookup(table, at, live, self._view, names)
        types = dict(self.arrangements.columns(table))
        if self.profile is not None:
            self.profile.lookups += time.perf_counter() - start
        if rows.num_rows == 0:  # nothing at those keys: no table to register
            return empty_relation(Schema(tuple(Column(n, types[n]) for n in names)))
        name = self._register("slice", rows)
        # The slice is consolidated already; unless it is exactly the keys' rows, the
        # keys' values pick them out of the hashes' rows. Its columns take back the
        # trace's exact types (Arrow has no ENUM, say).
        typed = ", ".join(f"CAST({quote(n)} AS {types[n]}) AS {quote(n)}" for n in names)
        return read_sql(f"SELECT {typed}, {W} FROM {name}", names, None if exact else at)

    @property
    def arranged(self) -> bool:
        return self.arrangements is not None and not self.warming

    def lookup(
        self, op: Operator, role: str, keys: pa.Table, hashes: np.ndarray
    ) -> tuple[pa.Table, np.ndarray] | None:
        if self.arrangements is None:
            return None
        start = time.perf_counter()
        table = self.store.operator_trace(self._view, op.fingerprint, role)
        found = self.arrangements.lookup_hashed(
            table, tuple(keys.column_names), keys, hashes, self._view
        )
        if self.profile is not None:
            self.profile.lookups += time.perf_counter() - start
        return found

    def relation(self, op: Operator, part: str, rows: pa.Table) -> str:
        sql = f"SELECT * FROM {self._register('mem', rows)}"
        if rows.num_rows == 0:
            self.empty.add(sql)
        return sql

    def _register(self, kind: str, rows: pa.Table) -> str:
        """Register ``rows`` with DuckDB for the rest of the epoch; the name given them."""
        return self.slices.register(f"__ivm_{kind}", rows)

    def release(self) -> None:
        """Release the Arrow tables this epoch's reads registered (after the epoch's
        transaction: DuckDB refuses it inside one that failed)."""
        self.slices.release()

    def _trace_schema(self, op: Operator, role: str) -> Schema:
        """The columns of ``op``'s trace ``role``."""
        key = (op.fingerprint, role)
        if key not in self._schemas:
            for spec in op.traces():
                self._schemas[(op.fingerprint, spec.role)] = spec.schema
        return self._schemas[key]

    def materialize(
        self, op: Operator, part: str, sql: str, rows: Mapping[str, pa.Table] | None = None
    ) -> str:
        for name, table in (rows or {}).items():
            self.con.register(name, table)
        try:
            result, written = self._write(op, part, "CREATE OR REPLACE TEMP TABLE {} AS " + sql)
        finally:
            for name in rows or {}:
                self.con.unregister(name)
        if written == 0:
            self.empty.add(result)
        else:
            self.empty.discard(result)
        return result

    def is_empty(self, sql: str) -> bool:
        return sql in self.empty

    def extend(self, op: Operator, part: str, sql: str) -> str:
        result, rows = self._write(op, part, "INSERT INTO {} " + sql)
        if rows:
            self.empty.discard(result)
        return result

    def _write(self, op: Operator, part: str, statement: str) -> tuple[str, int]:
        """Run ``statement`` (``{}``: scratch table ``part``), profiled; SQL reading the
        table and the rows written."""
        table = self.store.scratch(self._view, op.fingerprint, part)
        start = time.perf_counter()
        rows = run_sql(self.con, statement.replace("{}", table, 1), self._view, op)
        if self.profile is not None:
            self.profile.record(self._view, op.fingerprint, time.perf_counter() - start, rows)
        return f"SELECT * FROM {table}", rows

    def value(self, op: Operator, sql: str) -> object:
        start = time.perf_counter()
        try:
            rows = self.con.execute(sql).fetchall()  # all: no result left open
        except duckdb.Error as error:
            raise sql_failure(error, self._view, construct_of(op)) from error
        if self.profile is not None:
            self.profile.record(self._view, op.fingerprint, time.perf_counter() - start, 0)
        return rows[0][0] if rows else None

    def append(self, op: Operator, role: str, rows: str) -> None:
        if rows not in self.empty:  # appending nothing would still cost a statement
            table = self.store.operator_trace(self._view, op.fingerprint, role)
            self.commits.append((table, rows))

    def fetch(self, op: Operator, sql: str) -> pa.Table:
        start = time.perf_counter()
        try:
            rows = fetch_arrow(self.con, sql)
        except duckdb.Error as error:
            raise sql_failure(error, self._view, construct_of(op)) from error
        if self.profile is not None:
            self.profile.record(self._view, op.fingerprint, time.perf_counter() - start, 0)
        return rows

    def memory(self, op: Operator) -> dict[str, Any] | None:
        if self._memory is None or self.backfill:
            return None
        return self._memory.setdefault((self._view, op.fingerprint), {})

    def after_commit(self, action: Callable[[], None]) -> None:
        view = self._view

        def in_its_view() -> None:
            # The action reads state through this runner: as the view that asked for it
            # (operators of several views share fingerprints, their traces do not).
            saved, self._view = self._view, view
            try:
                action()
            finally:
                self._view = saved

        self.after_commit_actions.append(in_its_view)

    def forget_unmaintained(self, views: set[str]) -> None:
        """Drop what the session keeps in memory for operators of ``views`` (views this
        epoch ran) whose change was not computed: their inputs may have changed unseen."""
        if self._memory is None:
            return
        for key in [k for k in self._memory if k[0] in views and k not in self._change]:
            del self._memory[key]

    # -- helpers -----------------------------------------------------------------------------

    def _relation(self, name: str, schema: Schema) -> str:
        return f"SELECT {column_list(schema.names)}, {W} FROM {self.store.relation_trace(name)}"
