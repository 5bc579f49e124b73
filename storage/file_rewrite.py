"""Rewriting a DuckDB state file whose free blocks have grown: a file that never shrinks.

DuckDB reuses a file's free blocks but never gives them back: a trace compacted, a table
rewritten by ``ALTER``, rows deleted, each leaves blocks free that the file keeps. Over a
long run the free share settles at a third of the file or more (the 1,000-epoch soak's:
31 of 90 MB, the file 2.1× a fresh load of the same live rows). So when a state file
closes with at least ``REWRITE_FREE_SHARE`` of it free (and ``REWRITE_MIN_BYTES``), it is
copied into a new file (``COPY FROM DATABASE``: every table, view, sequence and macro,
rows stored afresh) that then replaces it:

1. ``copy_if_sparse``, on the connection still open: the copy is written to
   ``<file>.rewrite`` and detached (checkpointed, complete);
2. the connection is closed;
3. ``install_copy``: the copy is flushed to disk, renamed over the file (atomic) and the
   directory flushed.

A crash before the rename leaves the file as it was and a stale ``<file>.rewrite``, which
the next open removes (``remove_leftover_copy``); after it, the new file, which holds the
same committed state. A copy that fails (a full disk) is removed and the file kept, with
an ``IvmWarning``: closing never fails for it. The caller holds the state's lock
throughout, so no other session opens the file while it is replaced.

A copy costs about what writing the file's live bytes costs (≈0.25 s for 24 MB on the
2-core machine), and the share must have grown back to ``REWRITE_FREE_SHARE`` before the
next one: a rewrite comes after writes of at least a quarter of the file, so its cost is
amortized, as a compaction's is, over the writes that made it due.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from pathlib import Path

import duckdb

from ivm import faults
from ivm.errors import IvmWarning
from ivm.storage.results import fetch_first
from ivm.storage.sqltext import quote

REWRITE_FREE_SHARE = 0.25
"""The share of a state file that must be free blocks for its close to rewrite it."""
REWRITE_MIN_BYTES = 16 * 2**20
"""... and the least free bytes: a small file's free blocks are not worth a copy."""
COPY_SUFFIX = ".rewrite"


def copy_path(file: Path) -> Path:
    """Where the copy of state file ``file`` is written before it replaces it."""
    return file.with_name(file.name + COPY_SUFFIX)


def free_bytes(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """The free bytes of ``con``'s current database file, and the file's bytes in blocks."""
    row = fetch_first(
        con,
        "SELECT free_blocks * block_size, total_blocks * block_size FROM pragma_database_size() "
        "WHERE database_name = current_database()",
    )
    return (int(row[0]), int(row[1])) if row else (0, 0)


def sparse(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether ``con``'s current database file is free blocks enough to be rewritten."""
    free, total = free_bytes(con)
    return free >= REWRITE_MIN_BYTES and free >= total * REWRITE_FREE_SHARE


def copy_if_sparse(con: duckdb.DuckDBPyConnection, file: Path) -> Path | None:
    """If ``con``'s database (file ``file``, no transaction open) is sparse, copy it to
    ``copy_path(file)`` and return that path; else, or if the copy fails (warned), None."""
    try:
        con.execute("CHECKPOINT").fetchall()  # what the log holds, into the blocks counted
    except duckdb.Error as error:  # a full disk: the log stays, replayed at the next open
        warnings.warn(f"ivm: could not checkpoint the state file {file} at close (its log "
                      f"is replayed at the next open): {error}", IvmWarning, stacklevel=4)
        return None
    if not sparse(con):
        return None
    copy = copy_path(file)
    remove_leftover_copy(file)
    source = fetch_first(con, "SELECT current_database()")
    alias = "__ivm_rewrite"
    try:
        con.execute(f"ATTACH '{_escaped(copy)}' AS {alias}").fetchall()
        try:
            faults.reached("file.copy")
            con.execute(f"COPY FROM DATABASE {quote(str(source[0]))} TO {alias}").fetchall()
        finally:
            con.execute(f"DETACH {alias}").fetchall()
    except (OSError, duckdb.Error) as error:
        remove_leftover_copy(file)
        warnings.warn(f"ivm: could not rewrite the state file {file} to free its unused "
                      f"blocks (kept as it was): {error}", IvmWarning, stacklevel=4)
        return None
    faults.reached("file.copied")
    return copy


def install_copy(copy: Path, file: Path) -> None:
    """Replace state file ``file`` (closed) with its complete copy ``copy``, durably: the
    copy flushed, renamed over the file, the directory flushed. A failure keeps the file
    (the copy removed, warned)."""
    try:
        _flush(copy)
        faults.reached("file.flushed")
        os.replace(copy, file)
        _flush(file.parent)
    except OSError as error:
        remove_leftover_copy(file)
        warnings.warn(f"ivm: could not replace the state file {file} by its rewrite (kept "
                      f"as it was): {error}", IvmWarning, stacklevel=3)


def remove_leftover_copy(file: Path) -> None:
    """Remove a copy of ``file`` a crash or a failure left (and its log), if any."""
    copy = copy_path(file)
    for leftover in (copy, copy.with_name(copy.name + ".wal")):
        with contextlib.suppress(FileNotFoundError):
            leftover.unlink()


def _flush(path: Path) -> None:
    """fsync ``path`` (a file or a directory)."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _escaped(path: Path) -> str:
    return str(path).replace("'", "''")


__all__ = [
    "REWRITE_FREE_SHARE",
    "REWRITE_MIN_BYTES",
    "copy_if_sparse",
    "copy_path",
    "free_bytes",
    "install_copy",
    "remove_leftover_copy",
    "sparse",
]
