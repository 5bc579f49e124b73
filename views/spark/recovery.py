"""Spark mode's recovery: partitions ahead of the driver rolled back, strays removed.

The driver commits an epoch in ``ivm.duckdb`` only after every task of its Spark job
committed its partition, so a driver that dies (or an ingest that fails) in between
leaves partitions one epoch ahead of the committed one. ``roll_back_ahead`` finds them
by the epoch each partition records and negates that epoch's undo rows into its traces
(``ivm.storage.partitions``); the fence is moved first, so a task of the dead attempt
still running writes nothing afterwards. Each partition rolls back in a transaction of
its own: a recovery cut short leaves the rest ahead, found by the next one.

A DDL that a dead driver never committed leaves the directory of its table or view
(partition files a backfill wrote), and a committed drop that it never cleaned up
leaves the dropped one's: ``remove_strays`` removes every directory the catalog does
not name, as a session opens.

At a clean close, every partition file written since the open whose free blocks have
grown to a quarter of it is rewritten (``rewrite_sparse``, ``ivm.storage.file_rewrite``),
as the embedded state file is; a copy a crash left half made is removed at the next open.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from ivm import faults
from ivm.storage.file_rewrite import COPY_SUFFIX
from ivm.storage.partitions import (
    remove_empty_table_directories,
    rewrite_if_sparse,
    roll_back_ahead,
    stray_directories,
)

if TYPE_CHECKING:
    from ivm.views.spark.engine import SparkEngine


def recover(engine: SparkEngine) -> None:
    """Roll back every partition that applied an epoch the driver did not commit (one that
    epoch made is removed, with the table directories left empty)."""
    for directory in (engine.root / "tables", engine.root / "views"):
        for leftover in directory.glob(f"**/part-*.duckdb{COPY_SUFFIX}*"):
            leftover.unlink(missing_ok=True)  # a rewrite a crash cut short
        for file in sorted(directory.glob("**/part-*.duckdb")):
            if roll_back_ahead(file, engine.session.epoch):
                faults.reached("spark.rolled_back")
    remove_empty_table_directories(engine.root)


def remove_strays(engine: SparkEngine) -> None:
    """Remove the directories of tables and views the catalog does not hold (a DDL that a
    dead driver never committed, or a committed drop it never cleaned up)."""
    s = engine.session
    expected = {engine.directory(n) for n in [*s._tables, *s._views]}
    for directory in stray_directories(engine.root, expected):
        shutil.rmtree(directory, ignore_errors=True)


def rewrite_sparse(engine: SparkEngine, since: float) -> None:
    """Rewrite every partition file modified after ``since`` (seconds since the epoch) whose
    free blocks have grown; files not written since cannot have grown sparser."""
    for directory in (engine.root / "tables", engine.root / "views"):
        for file in sorted(directory.glob("**/part-*.duckdb")):
            if file.stat().st_mtime >= since:
                rewrite_if_sparse(file)
