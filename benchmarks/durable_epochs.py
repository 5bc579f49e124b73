"""The least a durable epoch costs in DuckDB: shapes of one committed write transaction.

Used by ``bench_statement_floor``. Every ivm epoch appends its changes to DuckDB tables
and commits them in one transaction (the durable copy of every trace). These shapes
time that transaction alone, on a database file and in memory, with no view work:

* one trace appended (1k rows from an Arrow batch) and the epoch counter updated;
* ten traces appended, one ``INSERT`` each (ten views' outputs or group versions);
* the same ten traces' rows written as one row each of an epoch log (each trace's rows
  as an Arrow IPC stream in a BLOB), one ``INSERT`` for all of them.

The first is the floor of any epoch on this stack; the ratio of the second to the third
is what "one durable write per epoch" (instead of one per trace) would save.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

TRACES = 10
"""Traces an epoch of ten simple views appends to."""


def trace_rows(rows: int, seed: int) -> pa.Table:
    """``rows`` rows of a trace: a key, a label, a decimal amount and the weight."""
    rng = np.random.default_rng(seed)
    return pa.table({
        "k": pa.array(rng.integers(0, 1 << 40, rows), pa.int64()),
        "label": pa.array(rng.choice(["open", "shipped", "returned"], rows)),
        "amount": pa.array(rng.integers(0, 10**6, rows), pa.int64()).cast(pa.decimal128(38, 2))
        .cast(pa.decimal128(18, 2)),
        "__w": pa.array(rng.choice([-1, 1], rows), pa.int64()),
    })


def ipc_bytes(rows: pa.Table) -> bytes:
    """``rows`` as an Arrow IPC stream."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, rows.schema) as writer:
        writer.write_table(rows)
    return sink.getvalue().to_pybytes()


class DurableEpochs:
    """A database with ``TRACES`` trace tables, an epoch log and an epoch counter: a file
    in ``folder``, or in memory (None)."""

    def __init__(self, folder: Path | None) -> None:
        self.con = duckdb.connect(str(folder / "epochs.duckdb") if folder else ":memory:")
        self.con.execute("SET threads = 1")
        for t in range(TRACES):
            self.con.execute(
                f"CREATE TABLE trace{t} (k BIGINT, label VARCHAR, amount DECIMAL(18,2), "
                "__w BIGINT)"
            )
        self.con.execute("CREATE TABLE epoch_log (epoch BIGINT, trace INTEGER, rows BLOB)")
        self.con.execute("CREATE TABLE meta AS SELECT 0 AS epoch")
        self.epoch = 0
        self.one = trace_rows(1000, 0)
        self.ten = [trace_rows(10, t) for t in range(TRACES)]

    def one_trace(self) -> None:
        """BEGIN, 1k rows appended to one trace, the epoch counter, COMMIT."""
        self.con.execute("BEGIN TRANSACTION")
        self.con.register("batch", self.one)
        self.con.execute("INSERT INTO trace0 SELECT * FROM batch")
        self.con.execute("UPDATE meta SET epoch = epoch + 1")
        self.con.execute("COMMIT")

    def insert_each(self) -> None:
        """BEGIN, ten traces appended with an INSERT each, the counter, COMMIT."""
        self.con.execute("BEGIN TRANSACTION")
        for t, rows in enumerate(self.ten):
            self.con.register(f"rows{t}", rows)
            self.con.execute(f"INSERT INTO trace{t} SELECT * FROM rows{t}")
        self.con.execute("UPDATE meta SET epoch = epoch + 1")
        self.con.execute("COMMIT")

    def one_log_write(self) -> None:
        """BEGIN, the ten traces' rows as ten epoch-log rows in one INSERT, the counter,
        COMMIT (serializing the rows to Arrow IPC included)."""
        self.epoch += 1
        log = pa.table({
            "epoch": pa.array([self.epoch] * TRACES, pa.int64()),
            "trace": pa.array(range(TRACES), pa.int32()),
            "rows": pa.array([ipc_bytes(rows) for rows in self.ten], pa.binary()),
        })
        self.con.execute("BEGIN TRANSACTION")
        self.con.register("log", log)
        self.con.execute("INSERT INTO epoch_log SELECT * FROM log")
        self.con.execute("UPDATE meta SET epoch = epoch + 1")
        self.con.execute("COMMIT")

    def shapes(self) -> dict[str, Callable[[], None]]:
        """Each shape by the name the benchmark prints."""
        return {
            "BEGIN, 1k rows into one trace, the epoch counter, COMMIT": self.one_trace,
            f"the same with {TRACES} traces of 10 rows, an INSERT each": self.insert_each,
            f"the same {TRACES} traces as one epoch-log INSERT (Arrow IPC rows)":
                self.one_log_write,
        }

    def close(self) -> None:
        """Close the database."""
        self.con.close()
