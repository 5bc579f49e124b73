"""DuckDB on one thread for a small epoch: its statements are too small to share.

An epoch of a few thousand changed rows is 10–40 statements over small Arrow inputs and
looked-up slices, each of which costs mostly parsing, binding and planning. With more
than one thread DuckDB still splits each statement's work into tasks and wakes its
threads for them, and on a small input that is more than the work. On the 2-core
machine, idle, epochs drawn at random to run on one thread or on both, ``bench_aggregate``
over 1M orders: 100 changed rows 32.5 against 35.3 ms, 1k 40.0 against 43.5 ms (the
DOUBLE views: 73.0 against 76.2 ms), 3k 53.0 against 59.1 ms; at 10k one thread loses
(the views' part 60 against 49 ms).

So an epoch whose batches hold fewer than ``SMALL_EPOCH_ROWS`` rows runs with DuckDB's
``threads`` at 1, set before its transaction begins and put back after it ends, however
it ends (a pair of ``SET`` statements: ≈0.5 ms). Larger epochs, first loads, compaction
after the commit, DDL and reads keep every thread. ``threads`` is a setting of the whole
database: a reader on another thread during a small epoch runs on one thread too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb

SMALL_EPOCH_ROWS = 5_000
"""Epochs whose batches hold fewer rows than this run DuckDB on one thread."""


def thread_count(con: duckdb.DuckDBPyConnection) -> int:
    """DuckDB's ``threads`` setting on ``con`` now."""
    row = con.execute("SELECT current_setting('threads')").fetchone()
    return int(row[0]) if row else 1


@contextmanager
def one_thread_if_small(con: duckdb.DuckDBPyConnection, rows: int, threads: int) -> Iterator[None]:
    """Run the block with DuckDB's ``threads`` at 1 when ``rows`` (the epoch's batch rows)
    is under ``SMALL_EPOCH_ROWS`` and ``threads`` (the setting outside epochs) is more;
    ``threads`` is put back after the block, whether it returns or raises (a put-back that
    DuckDB refuses leaves one thread, and the block's own error standing: a slower
    connection, never a different answer; the next small epoch puts it back again)."""
    if rows >= SMALL_EPOCH_ROWS or threads <= 1:
        yield
        return
    con.execute("SET threads = 1")
    try:
        yield
    finally:
        with contextlib.suppress(duckdb.Error):
            con.execute(f"SET threads = {int(threads)}")
