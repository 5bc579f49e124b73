"""One stage applied to one partition for one epoch: what a Spark task runs (no Spark here).

The task opens the partition's DuckDB file and, in one transaction:

1. if this ingest attempt (``Ticket.token``) already applied this epoch here,
   returns the stored output change: a task retried by Spark is exactly-once;
2. if the partition applied an epoch the driver never committed (a failed
   ingest), rolls that epoch back first;
3. computes the stage's output change from its input changes and the state
   before the epoch, stores it, appends to the traces, records the epoch.

A stage's input arrives as one *wide* Arrow table: ``__i`` (which input),
``__k…`` (the hashed key), then each input's columns ``i<i>_c<j>`` on the
wire (see ``ivm.execution.spark.wire``), then ``__w``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from ivm import faults
from ivm.errors import ExecutionError, IvmWarning, StateError
from ivm.execution.constraints import resolve_change, upsert_sql
from ivm.execution.embedded import DEFAULT_ITERATION_LIMIT, EpochRunner
from ivm.execution.exact import consolidate_exact_sql
from ivm.execution.failures import construct_of, sql_failure
from ivm.execution.spark.stages import CONTENTS, Stage, input_name
from ivm.execution.spark.wire import arrow_schema, conform, from_wire_sql, to_wire_sql
from ivm.operators.base import Operator
from ivm.plan.sql import consolidate_sql, empty_relation
from ivm.schema import Schema, TableSchema, quote
from ivm.storage.heap import keep_large_blocks_mapped
from ivm.storage.memory import task_default_limit
from ivm.storage.naming import FINGERPRINT_CHARS
from ivm.storage.partitions import (
    OUT,
    PartitionLog,
    attached_partition,
    compact_due,
    host_cursor,
    partition_file,
)
from ivm.storage.settings import apply
from ivm.storage.traces import create_trace

WIDE = "__ivm_wide"


@dataclass(frozen=True)
class Ticket:
    """What every task of one epoch is told by the driver."""

    epoch: int  # the epoch being applied
    committed: int  # the last epoch the driver committed
    token: str  # this ingest attempt (a retry of the same attempt re-emits)
    backfill: bool = False  # a new view: every partition runs, state starts empty
    upsert: bool = False  # table stages: an insert replaces the row with its key
    # The DuckDB settings the state evaluates under (TimeZone…: ``ivm.storage.settings``).
    settings: tuple[tuple[str, str], ...] = ()
    fence: str | None = None  # file holding the token of the one ingest allowed to write
    iteration_limit: int = DEFAULT_ITERATION_LIMIT  # the session's, for recursive views
    memory_limit: int | None = None  # bytes each task's DuckDB may use (None: its share)
    armed: tuple[faults.Arming, ...] = ()  # test hook: fault points armed in tasks (ivm.faults)


class PartitionNames:
    """The ``StateStore`` of a partition file: traces named by input, or by the role and
    fingerprint of the operator that keeps them."""

    def relation_trace(self, name: str) -> str:
        return quote(f"__ivm_{name}")

    def operator_trace(self, view: str, operator: str, role: str) -> str:
        return quote(f"__ivm_op_{role}-{operator[:FINGERPRINT_CHARS]}")

    def scratch(self, view: str, operator: str, part: str) -> str:
        return quote(f"__ivm_tmp{operator[:FINGERPRINT_CHARS]}_{part}")


NAMES = PartitionNames()
CONTENTS_TRACE = NAMES.relation_trace(CONTENTS)
"""The trace of a table's or view's contents, in the stage that stores them."""


def configure(con: duckdb.DuckDBPyConnection, ticket: Ticket) -> None:
    """Settings every task shares with the driver: those the state evaluates under (its
    time zone…, whatever the executor's ``TZ``), one thread (Spark already runs one
    task per core), and the memory its DuckDB may use (``ivm.storage.memory``); the
    worker's heap keeps large blocks mapped (``ivm.storage.heap``)."""
    keep_large_blocks_mapped()  # the Python worker's heap (ivm.storage.heap)
    limit = ticket.memory_limit or task_default_limit()
    apply(con, {**dict(ticket.settings), "threads": "1", "memory_limit": f"{limit}B"})


def check_fence(ticket: Ticket) -> None:
    """Refuse to write unless this ingest attempt is the one the driver runs now.

    A task of a failed ingest may still be running when the driver rolls the
    partitions back; the driver moves the fence first, so such a task writes nothing.
    """
    if ticket.fence is None:
        return
    try:
        current = Path(ticket.fence).read_text().strip()
    except OSError as error:
        raise ExecutionError(f"cannot read the epoch fence {ticket.fence}: {error}") from error
    if current != ticket.token:
        raise ExecutionError(
            f"a task of ingest attempt {ticket.token} ran after that attempt ended; refused"
        )


def constant_change(op: Operator, ticket: Ticket) -> pa.Table:
    """The change this epoch of ``op``, a leaf that reads no relation (a VALUES list), on the
    wire: the operator computes it from ``Run.backfill`` alone (its rows at a backfill)."""
    con = host_cursor()
    try:
        configure(con, ticket)
        change = EpochRunner(con, NAMES, {}, backfill=ticket.backfill).change(op)
        sql = to_wire_sql(change or empty_relation(op.schema), op.schema)
        table = con.sql(sql).to_arrow_table()
    except duckdb.Error as error:
        raise sql_failure(error, construct=construct_of(op)) from error
    finally:
        con.close()
    return conform(table, arrow_schema(op.schema))


def wide_columns(stage: Stage, index: int) -> list[str]:
    """Names of input ``index``'s columns in the wide table."""
    return [f"i{index}_c{j}" for j in range(len(stage.inputs[index].wire_schema.columns))]


def apply_partition(
    stage: Stage, directory: Path, bucket: int, ticket: Ticket, wide: pa.Table | None
) -> pa.Table:
    """Apply one epoch to partition ``bucket`` of ``stage``; returns its output change (wire)."""
    faults.adopt(ticket.armed)
    out_schema = arrow_schema(stage.output)
    if (wide is None or wide.num_rows == 0) and not ticket.backfill:
        return out_schema.empty_table()
    file = partition_file(directory, bucket)
    check_fence(ticket)  # before making anything: the files of a DDL a recovery removed
    file.parent.mkdir(parents=True, exist_ok=True)
    with attached_partition(file) as con:
        configure(con, ticket)
        check_fence(ticket)  # after taking the file's lock: a recovery may have begun
        con.execute("BEGIN TRANSACTION").fetchall()
        log = PartitionLog(con)
        if log.applied(ticket.epoch, ticket.token):
            output = _read_output(con, stage, out_schema)
            con.execute("ROLLBACK").fetchall()
            return output
        if log.epoch > ticket.epoch:
            raise ExecutionError(
                f"stage {stage.name}, partition {bucket}: a task of epoch {ticket.epoch} "
                f"came after the partition applied epoch {log.epoch}; it is refused"
            )
        if log.epoch > ticket.committed:  # an attempt of this epoch that was never committed
            log.roll_back()
        if log.fresh and not ticket.backfill and stage.table is None:
            raise StateError(
                f"stage {stage.name}: partition file {file.name} is missing (every partition "
                "of a view's stage is created with the view); the state is damaged"
            )
        log.begin()
        try:
            changes = _load_inputs(con, stage, wide, everything=log.fresh)
            if log.fresh:
                _create_traces(con, log, stage)
            _apply(con, log, stage, changes, ticket, fresh=log.fresh)
            log.finish(ticket.epoch, ticket.token)
        except duckdb.Error as error:  # the operators' own statements are classified already
            raise sql_failure(error, construct=f"stage {stage.name}") from error
        output = _read_output(con, stage, out_schema)
        faults.reached("task.applied", stage.kind)
        con.execute("COMMIT").fetchall()
        faults.reached("task.committed", stage.kind)
        try:  # compaction changes no contents: a failure must not fail the committed epoch
            compact_due(con, {table: key for table, _, key in stage_traces(stage)})
        except (duckdb.Error, OSError) as error:  # OSError: a full disk, say
            warnings.warn(f"ivm: compaction of {file} failed, will retry: {error}", IvmWarning,
                          stacklevel=2)
        return output


def _load_inputs(
    con: duckdb.DuckDBPyConnection, stage: Stage, wide: pa.Table | None, everything: bool
) -> dict[str, str]:
    """Temp tables of each input's change (DuckDB types); every input when ``everything``."""
    present: set[int] = set()
    if wide is not None and wide.num_rows:
        con.register(WIDE, wide)
        present = {int(i) for i in wide.column("__i").unique().to_pylist()}
    changes = {}
    try:
        for i, stage_input in enumerate(stage.inputs):
            table = quote(f"__ivm_batch{i}")
            if i in present:
                source = f"SELECT * FROM {WIDE} WHERE __i = {i}"
                sql = from_wire_sql(source, stage_input.wire_schema, wide_columns(stage, i))
                if stage_input.carried is not None:  # the input's filters and projections
                    leaf = quote(f"__ivm_leaf{i}")
                    con.execute(f"CREATE OR REPLACE TEMP TABLE {leaf} AS {sql}").fetchall()
                    sql = stage_input.carried.sql
            elif everything:
                sql = empty_relation(stage_input.schema)
            else:
                continue
            con.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS {sql}").fetchall()
            changes[input_name(i)] = f"SELECT * FROM {table}"
    finally:
        if present:
            con.unregister(WIDE)
    return changes


def stage_traces(stage: Stage) -> list[tuple[str, Schema, tuple[str, ...]]]:
    """(table, schema, sort key) of every trace a partition of ``stage`` keeps: the
    integrals of kept inputs, the operators' own traces, and the stored contents."""
    traces = [
        (NAMES.relation_trace(name), schema, key) for name, schema, key in stage.kept_inputs()
    ]
    if stage.circuit is not None:
        for op, spec in stage.circuit.traces():
            table = NAMES.operator_trace("", op.fingerprint, spec.role)
            traces.append((table, spec.schema, spec.key))
    if stage.contents_key is not None:
        traces.append((CONTENTS_TRACE, stage.output, stage.contents_key))
    return traces


def _create_traces(con: duckdb.DuckDBPyConnection, log: PartitionLog, stage: Stage) -> None:
    """The (empty) traces of a new partition."""
    for trace, schema, _ in stage_traces(stage):
        create_trace(con, trace, [(c.name, c.type) for c in schema.columns])
        log.track(trace)


def _apply(
    con: duckdb.DuckDBPyConnection,
    log: PartitionLog,
    stage: Stage,
    changes: dict[str, str],
    ticket: Ticket,
    fresh: bool,
) -> None:
    """Compute and store the output change, then append to the traces (old state first)."""
    commits: list[tuple[str, str]] = []
    output: str | None
    if stage.table is not None:  # already consolidated (and checked)
        log.store_output(_checked_change(con, stage.table, changes[input_name(0)], ticket))
        output = None
    elif stage.circuit is None:  # a view's output stage
        output = changes[input_name(0)]
    else:
        runner = EpochRunner(
            con, NAMES, changes, backfill=fresh, iteration_limit=ticket.iteration_limit,
            epoch=ticket.epoch,
        )
        output = runner.run(stage.circuit)
        commits = runner.commits
    if stage.table is None:
        change = output or empty_relation(stage.output)
        log.store_output(consolidate_sql(change, stage.output.names))
    for i, stage_input in enumerate(stage.inputs):
        name = input_name(i)
        if stage_input.kept and name in changes:
            commits.append((NAMES.relation_trace(name), changes[name]))
    if stage.contents:
        commits.append((CONTENTS_TRACE, f"SELECT * FROM {OUT}"))
    for target, rows in commits:
        log.append(target, rows)


def _checked_change(
    con: duckdb.DuckDBPyConnection, table: TableSchema, change: str, ticket: Ticket
) -> str:
    """A table's change as it applies to the stored rows (its deletes resolved to them,
    ``ivm.execution.constraints``); ConstraintError if it cannot."""
    change = consolidate_exact_sql(change, table.schema)
    if ticket.upsert and table.primary_key:
        change = upsert_sql(table, change, CONTENTS_TRACE)
    consolidated = quote("__ivm_consolidated")
    con.execute(f"CREATE OR REPLACE TEMP TABLE {consolidated} AS {change}").fetchall()
    return resolve_change(
        con, table, f"SELECT * FROM {consolidated}", CONTENTS_TRACE,
        into=quote("__ivm_checked"), scratch=quote("__ivm_touched"),
    )


def _read_output(con: duckdb.DuckDBPyConnection, stage: Stage, schema: pa.Schema) -> pa.Table:
    try:
        table = con.sql(to_wire_sql(f"SELECT * FROM {OUT}", stage.output)).to_arrow_table()
    except duckdb.Error as error:
        raise sql_failure(error, construct=f"stage {stage.name} (its output)") from error
    return conform(table, schema)
