"""Partition files (Spark mode): one DuckDB file per stage and partition, with epoch bookkeeping.

Layout under the state directory (names percent-encoded, so a table or view
name never becomes a path as it is)::

    ivm.duckdb                                  the driver's catalog and epoch
    fence                                       the ingest attempt allowed to write
    tables/t<n>-<table>/table/part-00000.duckdb a base table's rows, by primary key
    views/v<n>-<view>/<stage>/part-00000.duckdb one stage of a view's circuit

(``<n>``: the table's or view's creation number in the catalog.)

Besides its traces, each file records what makes a task exactly-once:

* ``__ivm_partition(epoch, previous, token)``: the last epoch applied here, the
  epoch applied before it, and the ingest attempt (``token``) that applied it;
* ``__ivm_undo_<trace>``: the rows that epoch appended to each trace, so the
  epoch can be rolled back if the driver never commits it (``__ivm_tails``
  marks the traces it appended to, and counts appends for compaction);
* ``__ivm_out``: the partition's output change of that epoch, which a task
  retried by Spark emits again instead of applying the epoch twice.

A partition is never more than one epoch ahead of the driver: the driver runs
one epoch at a time and commits it only after every stage succeeded.
"""

from __future__ import annotations

import hashlib
import itertools
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

import duckdb

from ivm.storage.file_rewrite import copy_if_sparse, install_copy, remove_leftover_copy
from ivm.storage.memory import spill_directory
from ivm.storage.results import fetch_first
from ivm.storage.sqltext import WEIGHT, quote
from ivm.storage.traces import TailSize, compact, release_blocks

META = "__ivm_partition"
UNDO = "__ivm_undo"
OUT = "__ivm_out"
TAILS = "__ivm_tails"
NEVER = -1
"""The epoch a partition records before its first (``__ivm_partition``'s epoch, previous)."""


MAX_NAME_BYTES = 200
"""Longer encoded names are cut and given a digest of the whole name (file systems stop
at 255 bytes)."""


def encode(name: str) -> str:
    """A file name for a table or view name: percent-encoded ('.' too, so never '.' or
    '..'), never empty, never longer than MAX_NAME_BYTES, distinct for distinct names."""
    encoded = urllib.parse.quote(name, safe="").replace(".", "%2E") or "%"
    if len(encoded) > MAX_NAME_BYTES:
        digest = hashlib.sha256(name.encode()).hexdigest()[:32]
        encoded = f"{encoded[: MAX_NAME_BYTES - 33]}~{digest}"
    return encoded


def table_directory(root: Path, table: str, generation: int) -> Path:
    """Directory of a base table's partition files.

    ``generation`` (the table's creation number in the catalog) makes each table
    of a name its own directory: a table dropped and created again, or a DDL that
    fails halfway, never mixes its files with another's.
    """
    return root / "tables" / f"t{generation}-{encode(table)}"


def view_directory(root: Path, view: str, generation: int) -> Path:
    """Directory of a view's stages (``generation``: as for tables)."""
    return root / "views" / f"v{generation}-{encode(view)}"


def stray_directories(root: Path, expected: set[Path]) -> list[Path]:
    """Table and view directories under ``root`` that ``expected`` does not list, and
    streams spooled by an ingest that never ended (``ivm.views.spark.spool``)."""
    found = [*(root / "tables").glob("t*"), *(root / "views").glob("v*"),
             *(root / "spool").glob("*")]
    return [d for d in found if d.is_dir() and d not in expected]


def write_fence(root: Path, token: str) -> Path:
    """Let only ingest attempt ``token`` write partition files from now on (atomically)."""
    fence = root / "fence"
    staged = root / "fence.next"
    staged.write_text(token)
    staged.replace(fence)
    return fence


def partition_file(directory: Path, bucket: int) -> Path:
    """The DuckDB file of partition ``bucket`` of a stage."""
    return directory / f"part-{bucket:05d}.duckdb"


def partition_files(directory: Path) -> list[Path]:
    """Every partition file of a stage, in partition order."""
    return sorted(directory.glob("part-*.duckdb"))


LOCK_WAIT_SECONDS = 120.0
"""How long a task waits for a partition file another process holds (a duplicate task)."""


def open_partition(file: Path, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Connect to a partition file, waiting while another process holds its lock.

    Spark may run two attempts of one task at once (speculation, a re-executed
    stage); DuckDB lets one process write a file, so the later one waits its turn
    and then finds the epoch applied.
    """
    return _retry_locked(  # type: ignore[return-value]
        lambda: duckdb.connect(str(file), read_only=read_only)
    )


_HOST: duckdb.DuckDBPyConnection | None = None
"""An in-memory DuckDB this process attaches partition files to (see ``attached_partition``)."""
_ATTACHED = itertools.count()


def host_cursor() -> duckdb.DuckDBPyConnection:
    """A new connection (close it after use) to this process's in-memory DuckDB, which is
    started once: starting a database costs ≈30 ms of CPU, more than a small task's work.
    Each task gives it the memory it may use (``stage_task.configure``)."""
    global _HOST
    if _HOST is None:  # spilling to a directory of its own (the working one is Spark's)
        _HOST = duckdb.connect(config={"temp_directory": spill_directory()})
    return _HOST.cursor()


@contextmanager
def attached_partition(file: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection whose default database is partition ``file``, read-write, for the
    duration of the block; the file is detached (checkpointed, its lock released) after.

    Starting a DuckDB database costs ≈30 ms of CPU, more than a small epoch's work in a
    partition: a Spark task applies an epoch to many partitions, so each process starts
    one in-memory database and attaches the files to it in turn. Waits for another
    process's lock as ``open_partition`` does. A block that fails leaving the file without
    a table (a new partition's first epoch refused) removes the file.
    """
    alias = f"__ivm_part_{next(_ATTACHED)}"
    con = host_cursor()
    _retry_locked(lambda: con.execute(f"ATTACH {_literal(str(file))} AS {alias}").fetchall())
    try:
        con.execute(f"USE {alias}").fetchall()
        yield con
    except BaseException:
        _discard_if_empty(con, alias, file)
        raise
    finally:
        try:
            with suppress(duckdb.Error):  # an error may leave a transaction open: undo it
                con.execute("ROLLBACK").fetchall()
            con.execute("USE memory").fetchall()
            con.execute(f"DETACH {alias}").fetchall()
        finally:
            con.close()


def _discard_if_empty(con: duckdb.DuckDBPyConnection, alias: str, file: Path) -> None:
    """After a failure in ``attached_partition``'s block: if the file holds no table (its
    first transaction rolled back, or it was made by the ATTACH), remove it, so that a
    refused epoch leaves no file behind. The lock is still held: no other process can
    have written it, and one waiting for it makes the file anew."""
    with suppress(duckdb.Error):
        con.execute("ROLLBACK").fetchall()
    with suppress(duckdb.Error, OSError):
        tables = fetch_first(
            con, f"SELECT count(*) FROM duckdb_tables() WHERE database_name = {_literal(alias)}"
        )
        if tables is not None and tables[0] == 0:
            file.unlink(missing_ok=True)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _retry_locked(attempt: Callable[[], object]) -> object:
    """Run ``attempt`` until it does not fail on another process's file lock (or time out)."""
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    pause = 0.01
    while True:
        try:
            return attempt()
        except duckdb.IOException as error:
            if "lock" not in str(error).lower() or time.monotonic() > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.5)


class PartitionLog:
    """Epoch bookkeeping of one partition file; every method runs in the caller's transaction.

    Each trace ``T`` has an undo table holding the rows the last epoch appended to
    it, and a row in ``__ivm_tails`` with its compaction counters (rows kept at the last
    compaction, rows appended since and how many of those retract: weight < 0) and a
    ``dirty`` flag (appended to in the last epoch). Nothing is created or dropped per
    epoch; the counters are updated once per epoch, by ``finish``, from the undo tables.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self._appended: list[str] = []  # traces appended to in this epoch, in order
        present = {r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
            "UNION ALL SELECT '.' || column_name FROM duckdb_columns() "
            f"WHERE database_name = current_database() AND table_name = '{TAILS}' "
            "AND column_name = 'retracted'"
        ).fetchall()}
        self.fresh = META not in present
        if self.fresh:
            con.execute(
                f"CREATE TABLE {META} (epoch BIGINT, previous BIGINT, token VARCHAR)"
            ).fetchall()
            con.execute(f"INSERT INTO {META} VALUES ({NEVER}, {NEVER}, '')").fetchall()
            con.execute(
                f"CREATE TABLE {TAILS} (target VARCHAR, base BIGINT, appended BIGINT, "
                "dirty BOOLEAN, retracted BIGINT DEFAULT 0)"
            ).fetchall()
        elif ".retracted" not in present:  # a partition written before retractions were counted
            con.execute(f"ALTER TABLE {TAILS} ADD COLUMN retracted BIGINT DEFAULT 0").fetchall()
        row = fetch_first(con, f"SELECT epoch, previous, token FROM {META}")
        assert row is not None
        self.epoch, self.previous, self.token = int(row[0]), int(row[1]), str(row[2])

    def applied(self, epoch: int, token: str) -> bool:
        """True when this very ingest attempt already applied ``epoch`` here."""
        return self.epoch == epoch and self.token == token

    def roll_back(self) -> None:
        """Undo the last epoch: append the negation of every row it appended."""
        for target in self._dirty():
            self.con.execute(
                f"INSERT INTO {target} SELECT * REPLACE (-{WEIGHT} AS {WEIGHT}) "
                f"FROM {undo_table(target)}"
            ).fetchall()
        self.begin()
        self.con.execute(f"DROP TABLE IF EXISTS {OUT}").fetchall()
        self.con.execute(f"UPDATE {META} SET epoch = previous, token = ''").fetchall()
        self.epoch, self.token = self.previous, ""

    def begin(self) -> None:
        """Start a new epoch here: the previous epoch's undo rows are no longer needed."""
        dirty = self._dirty()
        for target in dirty:
            self.con.execute(f"DELETE FROM {undo_table(target)}").fetchall()
        if dirty:
            self.con.execute(f"UPDATE {TAILS} SET dirty = false WHERE dirty").fetchall()

    def store_output(self, sql: str) -> None:
        """Keep this epoch's output change (computed before any trace is appended to)."""
        self.con.execute(f"CREATE OR REPLACE TABLE {OUT} AS {sql}").fetchall()

    def append(self, target: str, rows: str) -> None:
        """Append ``rows`` to trace ``target``, remembering them for a roll-back."""
        self.con.execute(f"INSERT INTO {undo_table(target)} {rows}").fetchall()
        self.con.execute(f"INSERT INTO {target} {rows}").fetchall()
        if target not in self._appended:
            self._appended.append(target)

    def track(self, target: str) -> None:
        """Start keeping a new trace: its undo table and its compaction counters."""
        self.con.execute(
            f"CREATE TABLE {undo_table(target)} AS SELECT * FROM {target} LIMIT 0"
        ).fetchall()
        self.con.execute(f"INSERT INTO {TAILS} VALUES (?, 0, 0, false, 0)", [target]).fetchall()

    def finish(self, epoch: int, token: str) -> None:
        """Record that ``token`` applied ``epoch`` here, and what it appended (one statement
        for every trace: the rows of its undo table, which holds this epoch's appends)."""
        if self._appended:
            counts = " UNION ALL ".join(
                f"SELECT ? AS target, count(*) AS n, count(*) FILTER (WHERE {WEIGHT} < 0) AS r "
                f"FROM {undo_table(target)}" for target in self._appended
            )
            self.con.execute(
                f"UPDATE {TAILS} SET appended = appended + c.n, retracted = retracted + c.r, "
                f"dirty = true FROM ({counts}) AS c WHERE {TAILS}.target = c.target",
                self._appended,
            ).fetchall()
            self._appended = []
        self.con.execute(
            f"UPDATE {META} SET previous = epoch, epoch = ?, token = ?", [epoch, token]
        ).fetchall()

    def _dirty(self) -> list[str]:
        rows = self.con.execute(f"SELECT target FROM {TAILS} WHERE dirty ORDER BY target")
        return [str(r[0]) for r in rows.fetchall()]


def undo_table(target: str) -> str:
    """The undo table of trace ``target`` (a quoted name)."""
    return quote(f"{UNDO}_{target[1:-1]}" if target.startswith('"') else f"{UNDO}_{target}")


def compact_due(con: duckdb.DuckDBPyConnection, keys: dict[str, Sequence[str]]) -> None:
    """Compact the partition's traces whose appended tail is due (outside any transaction)."""
    rows = con.execute(f"SELECT target, base, appended, retracted FROM {TAILS}").fetchall()
    for target, base, appended, retracted in rows:
        size = TailSize(int(base), int(appended), retracted=int(retracted or 0),
                        retractions_known=True)
        if size.due():
            kept = compact(con, target, keys.get(target, ()))
            con.execute(
                f"UPDATE {TAILS} SET base = ?, appended = 0, retracted = 0 WHERE target = ?",
                [kept, target],
            ).fetchall()
            release_blocks(con)


def roll_back_ahead(file: Path, committed: int) -> bool:
    """Roll back partition ``file`` if it applied an epoch after ``committed``; True if it did.

    A partition whose first epoch that was (the file made by the epoch's task) is removed
    instead: rolled back it would hold nothing, and the state would keep a file that the
    failed ingest added (a rejected batch changes nothing, its files included)."""
    con = open_partition(file)
    try:
        con.execute("BEGIN TRANSACTION").fetchall()
        log = PartitionLog(con)
        if log.epoch <= committed:
            con.execute("ROLLBACK").fetchall()
            return False
        first = log.previous < 0
        log.roll_back()
        con.execute("COMMIT").fetchall()
    finally:
        con.close()
    if first:
        for made in (file, file.with_name(file.name + ".wal")):
            made.unlink(missing_ok=True)
    return True


def rewrite_if_sparse(file: Path) -> bool:
    """Rewrite partition ``file`` if its free blocks have grown (``ivm.storage.file_rewrite``:
    copied while attached, the copy renamed over it once detached); True if it was. Only
    where no task can hold the file: the driver, at a clean close (the fence closed)."""
    remove_leftover_copy(file)
    with attached_partition(file) as con:
        copy = copy_if_sparse(con, file)
    if copy is None:
        return False
    install_copy(copy, file)
    return True


def remove_empty_table_directories(root: Path) -> None:
    """Remove the table directories under state directory ``root`` that hold no file: a
    table's are made by its first epoch's tasks, and a refused epoch's files are gone."""
    tables = root / "tables"
    for empty in [*tables.glob("*/*"), *tables.glob("*")]:  # stages before their tables
        with suppress(OSError):  # not empty (or not a directory): kept
            empty.rmdir()
