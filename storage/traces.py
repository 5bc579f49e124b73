"""Traces as DuckDB tables: append-only rows with weights, compacted lazily.

A trace is a table of the relation's columns plus ``__w``. Appends are plain
INSERTs (cheap); equal rows may appear many times with any weights. Compaction
sums the weights of equal rows, drops zeros and re-sorts by the trace's key
(so DuckDB's zone maps prune scans): the "spine" of differential dataflow,
reduced to one level. It runs when the rows appended since the last compaction
exceed a fraction of the rows kept then, so a trace grows with live data, not
with history.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import pyarrow as pa

from ivm import faults
from ivm.storage.results import fetch_first
from ivm.storage.sqltext import WEIGHT, W, column_list, consolidate_sql, expand_sql, quote

COMPACT_FRACTION = 0.5
"""Compact when the appended tail exceeds this fraction of the compacted base…"""
COMPACT_MIN_ROWS = 5_000
"""…and is at least this many rows: a small trace is cheap to compact, but not at every
epoch. (At 50k, each of a soak's 30-odd small traces held up to 50k dead rows: its state
was 2.7× a fresh load of the same live rows.)"""
SAVED_TAILS = "__ivm_trace_tails"
"""The catalog database's table of every trace's tail, as the last clean close left it."""


def create_trace(
    con: duckdb.DuckDBPyConnection, table: str, columns: Sequence[tuple[str, str]]
) -> None:
    """Create an empty trace table with ``columns`` ((name, DuckDB type) pairs) and a weight."""
    columns = [f"{quote(name)} {type_}" for name, type_ in columns] + [f"{W} BIGINT"]
    con.execute(f"CREATE TABLE {table} ({', '.join(columns)})").fetchall()


def create_reader(
    con: duckdb.DuckDBPyConnection, name: str, table: str, names: Sequence[str]
) -> None:
    """A DuckDB view named ``name`` showing the trace as a bag: one row per live copy."""
    live = consolidate_sql(f"SELECT * FROM {table}", names, positive_only=True)
    con.execute(f"CREATE OR REPLACE VIEW {quote(name)} AS {expand_sql(live, names)}").fetchall()


@dataclass
class TailSize:
    """Rows kept at the last compaction and rows appended since; of these, the rows with
    negative weights, when every append since said how many (a base table's)."""

    base: int = 0
    appended: int = 0
    empty: bool = False
    retracted: int = 0
    retractions_known: bool = False

    def due(self) -> bool:
        """True when compacting would drop enough rows. Where the retracting rows are
        counted, only they and the rows they cancel are dropped, and compaction runs
        when they reach half the live rows (the rows held less those): a tail of inserts
        (a load in several epochs) is never compacted, which would rewrite the whole
        table at every epoch (a 75M-row load in 15 epochs consolidated 600M rows), and
        the live rows include the tail (measured against the first epoch's 5M rows only,
        TPC-H SF10's deletes rewrote all 60M lineitems after 21 batches). Elsewhere the
        tail's size stands for what it cancels, against the rows kept at the last
        compaction."""
        if self.retractions_known:
            dropped = 2 * self.retracted
            live = self.base + self.appended - dropped
            return dropped >= max(COMPACT_MIN_ROWS, COMPACT_FRACTION * live)
        return self.appended >= max(COMPACT_MIN_ROWS, COMPACT_FRACTION * self.base)

    def compacted(self, rows: int) -> None:
        """The trace was just compacted to ``rows`` rows."""
        self.base, self.appended, self.retracted, self.retractions_known = rows, 0, 0, True


class Compactor:
    """Tracks each trace's tail and compacts the ones that are due."""

    def __init__(self) -> None:
        self.sizes: dict[str, TailSize] = {}

    def appended(
        self, table: str, rows: int, consolidated: bool = False, retracted: int | None = None
    ) -> None:
        """Record ``rows`` appended to ``table``, ``retracted`` of them with a negative
        weight when known. Consolidated rows (each once) appended to a trace known to be
        empty leave it compacted: a first load is not compacted again (nor is a view's
        first contents, appended after an epoch that changed nothing)."""
        size = self.sizes.get(table)
        if size is None:
            size = self.sizes[table] = TailSize(empty=False)
        if consolidated and size.empty:
            size.base = rows
        else:
            size.appended += rows
            if retracted is None:
                size.retractions_known = False
            else:
                size.retracted += retracted
        size.empty = size.empty and rows == 0

    def backfilled(self, table: str, rows: int) -> None:
        """Record ``rows`` a view's backfill (at its creation, or recomputed into its
        emptied traces) appended to ``table``: they are its base, as a first load's rows
        are, compacted only when later appends reach half of them. A second backfill
        append to the same trace is tail."""
        self.sizes.setdefault(table, TailSize(empty=True, retractions_known=True))
        self.appended(table, rows, consolidated=True)

    def created(self, table: str) -> None:
        """Record that ``table`` was just created, empty."""
        self.sizes[table] = TailSize(empty=True, retractions_known=True)

    def compact_due(self, con: duckdb.DuckDBPyConnection, keys: dict[str, Sequence[str]]) -> None:
        """Compact every trace whose tail is due; ``keys`` gives each trace's sort key."""
        for table, size in self.sizes.items():
            if size.due():
                size.compacted(compact(con, table, keys.get(table, ())))
                release_blocks(con)

    def forget(self, table: str) -> None:
        """Stop tracking a dropped trace."""
        self.sizes.pop(table, None)

    def save(self, con: duckdb.DuckDBPyConnection) -> None:
        """Keep every trace's tail in ``con``'s database (at a clean close) for ``load``: a
        trace that gains a few rows per session is then compacted all the same, once its
        tail over many sessions is due (counted per session, the 1,000-epoch soak's
        derivations trace, reopened every 100 epochs, grew to 311,897 rows for 1 live)."""
        names = list(self.sizes)
        sizes = [self.sizes[n] for n in names]
        columns = {
            "trace": pa.array(names, pa.string()),
            "base": pa.array([s.base for s in sizes], pa.int64()),
            "appended": pa.array([s.appended for s in sizes], pa.int64()),
            "retracted": pa.array([s.retracted for s in sizes], pa.int64()),
            "known": pa.array([s.retractions_known for s in sizes], pa.bool_()),
            "empty": pa.array([s.empty for s in sizes], pa.bool_()),
        }
        cursor = con.cursor()  # its own: whatever the session's connection has pending
        try:
            cursor.register("__ivm_tails_saved", pa.table(columns))
            cursor.execute(
                f"CREATE OR REPLACE TABLE {SAVED_TAILS} AS SELECT * FROM __ivm_tails_saved"
            ).fetchall()
        finally:
            cursor.close()

    def load(self, con: duckdb.DuckDBPyConnection) -> None:
        """Take back the tails ``save`` kept (none before a first clean close: then every
        trace's tail starts at zero, as it did before tails were kept)."""
        present = con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE table_name = ? "
            "AND database_name = current_database()", [SAVED_TAILS]
        ).fetchall()
        if not present[0][0]:
            return
        for name, base, appended, retracted, known, empty in con.execute(
            f"SELECT trace, base, appended, retracted, known, empty FROM {SAVED_TAILS}"
        ).fetchall():
            self.sizes[str(name)] = TailSize(int(base), int(appended), bool(empty),
                                             int(retracted), bool(known))


def release_blocks(con: duckdb.DuckDBPyConnection) -> None:
    """Checkpoint after a compaction (outside a transaction), so that the blocks of the
    rows it replaced are free for what is written next. Until DuckDB's own checkpoint (at
    16 MB of log) a compacted trace holds its old and its new rows in the file, and so
    does every trace compacted before that checkpoint; a DuckDB file never shrinks, so
    the file keeps the room of all of them at once (the 1,000-epoch soak's: 40 of 123
    blocks free). Checkpointed one by one, a compaction reuses its predecessors' blocks.
    Without a file (an in-memory database) there are no blocks to free, and DuckDB's
    CHECKPOINT would still rewrite the compacted table in memory (42 ms an epoch of
    ``bench_aggregate``'s 10k changes): it is skipped."""
    path = fetch_first(
        con, "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
    )
    if path is not None and path[0] is not None:
        # While another cursor's write transaction is open (a reader on another thread)
        # DuckDB refuses it: the blocks are freed at a later checkpoint instead; the
        # compaction itself has committed.
        with contextlib.suppress(duckdb.TransactionException):
            con.execute("CHECKPOINT").fetchall()


def compact(con: duckdb.DuckDBPyConnection, table: str, key: Sequence[str]) -> int:
    """Consolidate ``table`` in place (one transaction); returns the rows kept.

    One statement rewrites the table (``CREATE OR REPLACE TABLE … AS`` its consolidated
    rows): a third cheaper than consolidating into a scratch table, emptying the trace
    and copying the rows back (``bench_aggregate``'s 50k group versions with a 90k-row
    tail: 17 against 27 ms). A trace table has no constraints, indexes or defaults to
    lose, and views over it are bound by name at each read."""
    names = [r[0] for r in con.execute(f"DESCRIBE {table}").fetchall() if r[0] != WEIGHT]
    order = f" ORDER BY {column_list(key)}" if key else ""
    con.execute("BEGIN TRANSACTION").fetchall()
    try:
        faults.reached("compaction.begin")
        consolidated = consolidate_sql(f"SELECT * FROM {table}", names)
        rows = fetch_first(con, f"CREATE OR REPLACE TABLE {table} AS {consolidated}{order}")
        faults.reached("compaction.commit")
        con.execute("COMMIT").fetchall()
    except BaseException:
        con.execute("ROLLBACK").fetchall()
        raise
    return int(rows[0]) if rows else 0
