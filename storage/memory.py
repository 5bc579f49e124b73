"""A session's memory budget: one limit for DuckDB and for what ivm keeps in memory.

``ivm.connect(..., memory_limit=...)`` takes bytes or DuckDB's spelling (``"4GB"``,
``"512MiB"``, ``"50%"`` of the machine); by default a session may use half of the
machine's memory (``DEFAULT_FRACTION``; the least of the physical memory and a cgroup's
limit). Half, rather than DuckDB's own 80 %: the limit bounds DuckDB and the state ivm
holds in memory, not the rest of the process (the batches a caller holds, the deltas an
epoch returns, Python itself, and in Spark's local mode a JVM and its Python workers on
the same machine), and a merge of two sorted runs briefly holds both.

The one limit is shared out so that the two never add up to more:

* the in-memory state (arrangements, row indexes, the deltas kept for replays) is what
  the session holds between statements, ``MemoryBudget.held``. An arrangement is built
  or merged into only while the state stays within half of the limit (``STATE_SHARE``):
  past it the arrangement is dropped and its reads go to the table (a scan, in DuckDB,
  which may spill), so a view whose state outgrows memory gets slower, never killed;
* DuckDB gets what the state leaves, and never less than a quarter of the limit
  (``DUCKDB_FLOOR``): ``SET memory_limit`` is given before every epoch and DDL script,
  when what is held has moved by more than 1/32 of the limit since it was last set.
  DuckDB spills past it to its temporary directory (``temp_directory``: beside a
  persistent state file, ``<file>.tmp``, or a directory of its own under the system's
  temporary directory for an in-memory session), and raises ``OutOfMemoryException``
  where it cannot, which the session turns into ``ivm.ResourceError``.

What cannot spill is checked before it is allocated (``MemoryBudget.require``): an
epoch's batches need about ``APPLY_BYTES_PER_ROW`` bytes a row beyond their own (their
hashes and the row index's new entries), and every view's change is fetched into Arrow
once the epoch commits, so a change that would not fit fails the epoch instead.

In Spark mode every partition task's DuckDB gets the session's limit when one was given,
else ``task_default_limit()``: the default fraction of its own machine's memory shared
by the tasks that machine runs at once (one per core).
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import duckdb

from ivm.errors import IvmError, ResourceError
from ivm.storage.sqltext import quote

DEFAULT_FRACTION = 0.5
"""The share of the machine's memory a session may use unless told otherwise."""
STATE_SHARE = 0.5
"""The share of the limit the in-memory state may reach by building arrangements."""
DUCKDB_FLOOR = 0.25
"""The least share of the limit DuckDB is given, whatever the state holds."""
APPLY_BYTES_PER_ROW = 48
"""Memory an epoch needs per batch row beyond the batch itself: the row's two hashes and
count as the checks read them (24 bytes) and the row index's entry (24 bytes)."""
RESET_STEP = 32
"""DuckDB's limit is given again when its share moved by more than 1/RESET_STEP of it."""

_UNITS = {
    "": 1, "b": 1,
    "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
    "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
}
_LIMIT = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*|%)\s*$", re.IGNORECASE)
_SPILLS = itertools.count()

FIXED_WIDTHS = {
    "BOOLEAN": 1, "TINYINT": 1, "UTINYINT": 1, "SMALLINT": 2, "USMALLINT": 2,
    "INTEGER": 4, "UINTEGER": 4, "BIGINT": 8, "UBIGINT": 8, "HUGEINT": 16, "UHUGEINT": 16,
    "FLOAT": 4, "DOUBLE": 8, "DATE": 4, "TIME": 8, "TIME WITH TIME ZONE": 8,
    "TIMESTAMP": 8, "TIMESTAMP WITH TIME ZONE": 8, "TIMESTAMP_NS": 8, "TIMESTAMP_MS": 8,
    "TIMESTAMP_S": 8, "UUID": 16, "INTERVAL": 16,
}
"""Bytes a value of each fixed-width DuckDB type takes in Arrow."""


@functools.cache
def machine_memory() -> int:
    """The memory this process may use on its machine: the physical memory, or a
    cgroup's limit when that is lower (a container)."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not a POSIX system: assume 8 GiB
        physical = 8 * 1024**3
    limits = [physical]
    for file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(file).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) > 0:
            limits.append(int(text))
    return min(limits)


def default_limit() -> int:
    """A session's limit unless one is given: ``DEFAULT_FRACTION`` of the machine's memory."""
    return int(machine_memory() * DEFAULT_FRACTION)


def task_default_limit() -> int:
    """A Spark task's limit when the session gave none: the default fraction of its own
    machine's memory, shared by the tasks it runs at once (one per core)."""
    return max(1, default_limit() // (os.cpu_count() or 1))


def parse_limit(value: object) -> int:
    """``value`` in bytes: an integer, or DuckDB's spelling (``"4GB"``: units of 1000,
    ``"4GiB"``: of 1024, ``"50%"``: of the machine's memory); IvmError for anything else."""
    if isinstance(value, int) and not isinstance(value, bool):
        nbytes = value
    elif isinstance(value, str) and (match := _LIMIT.match(value)):
        number, unit = float(match[1]), match[2].lower()
        if unit == "%":
            nbytes = int(machine_memory() * number / 100)
        elif unit in _UNITS:
            nbytes = int(number * _UNITS[unit])
        else:
            raise IvmError(
                f"memory_limit: unknown unit {match[2]!r} in {value!r} (use B, KB, MB, GB, TB, "
                "KiB, MiB, GiB, TiB or %)"
            )
    else:
        raise IvmError(
            f"memory_limit takes bytes (an integer) or a size such as '4GB', not {value!r}"
        )
    if nbytes <= 0:
        raise IvmError(f"memory_limit must be more than zero bytes, not {value!r}")
    return nbytes


def describe(nbytes: int) -> str:
    """``nbytes`` for a message, in the units ``memory_limit`` is written in: ``16.0 MB``."""
    for unit, size in (("TB", 1000**4), ("GB", 1000**3), ("MB", 1000**2), ("KB", 1000)):
        if nbytes >= size:
            return f"{nbytes / size:.1f} {unit}"
    return f"{nbytes} bytes"


def spill_directory() -> str:
    """A temporary directory of this process's own for an in-memory DuckDB to spill to
    (DuckDB creates it when it first spills and removes it when the database closes)."""
    name = f"ivm-spill-{os.getpid()}-{next(_SPILLS)}"
    return str(Path(tempfile.gettempdir()) / name)


def set_limit_sql(nbytes: int) -> str:
    """The statement giving DuckDB ``nbytes`` of memory."""
    return f"SET memory_limit = '{int(nbytes)}B'"


class MemoryBudget:
    """One session's memory limit and how it is shared out (see the module docstring).

    ``held`` is set by the session: the bytes its in-memory state holds now.
    """

    def __init__(self, limit: int | str | None = None) -> None:
        self.explicit = limit is not None
        """Whether the limit was given (else the default): Spark tasks get it only then."""
        self.limit = parse_limit(limit) if limit is not None else default_limit()
        self.held: Callable[[], int] = lambda: 0
        self._given: int | None = None  # the memory_limit DuckDB was given last

    def configure(self, con: duckdb.DuckDBPyConnection, temp_directory: str) -> None:
        """Give a new connection's database its share and the directory it spills to."""
        escaped = temp_directory.replace("'", "''")
        con.execute(f"SET temp_directory = '{escaped}'").fetchall()
        self._given = None
        self.settle(con)

    def duckdb_config(self) -> dict[str, str]:
        """Configuration of a new in-memory DuckDB a session reads with: the limit, and a
        directory of its own to spill to."""
        return {"memory_limit": f"{self.limit}B", "temp_directory": spill_directory()}

    def duckdb_share(self, held: int) -> int:
        """DuckDB's memory_limit while the state holds ``held`` bytes."""
        return max(self.limit - held, int(self.limit * DUCKDB_FLOOR))

    def settle(self, con: duckdb.DuckDBPyConnection) -> None:
        """Give DuckDB its share for what the state holds now, if it moved enough since it
        was last given (one statement, before an epoch or a DDL script)."""
        share = self.duckdb_share(self.held())
        if self._given is None or abs(share - self._given) > self.limit // RESET_STEP:
            con.execute(set_limit_sql(share)).fetchall()
            self._given = share

    def admits(self, nbytes: int) -> bool:
        """Whether the state may grow by ``nbytes`` (an arrangement built or merged)."""
        return self.held() + nbytes <= self.limit * STATE_SHARE

    def over(self) -> bool:
        """Whether the state holds more than its share already."""
        return not self.admits(0)

    def require(self, nbytes: int, what: str) -> None:
        """ResourceError unless ``nbytes`` more fit in the limit beside what is held;
        ``what`` (the user's terms: ``"table 'orders': the batch (…)"``) needs them."""
        held = self.held()
        if held + nbytes > self.limit:
            raise ResourceError(
                f"{what} needs about {describe(nbytes)} of memory, more than {self.text()} "
                f"leaves ({describe(held)} of it held by arrangements and indexes): nothing "
                "was applied; apply it in smaller batches, or raise memory_limit"
            )

    def text(self) -> str:
        """The limit as a message names it."""
        origin = "" if self.explicit else " (the default: half of the machine's memory)"
        return f"the session's memory limit of {describe(self.limit)}{origin}"


def width(column_type: str) -> int | None:
    """Bytes a value of DuckDB type ``column_type`` takes in Arrow; None when it varies."""
    upper = column_type.upper()
    if upper in FIXED_WIDTHS:
        return FIXED_WIDTHS[upper]
    decimal = re.match(r"DECIMAL\((\d+)", upper)
    if decimal:
        return 8 if int(decimal[1]) <= 18 else 16
    return None  # strings, blobs, nested and other types


def variable_bytes_sql(name: str, column_type: str) -> str:
    """SQL summing the bytes of a variable-width column's values (text of nested ones)."""
    column = quote(name)
    upper = column_type.upper()
    if upper == "BLOB":
        return f"COALESCE(SUM(octet_length({column})), 0)"
    if upper == "VARCHAR":
        return f"COALESCE(SUM(strlen({column})), 0)"
    return f"COALESCE(SUM(strlen(CAST({column} AS VARCHAR))), 0)"


def estimate_bytes(
    con: duckdb.DuckDBPyConnection, table: str, columns: Sequence[tuple[str, str]],
    per_row: int = 0,
) -> int:
    """About the bytes ``columns`` (name, DuckDB type) of every row of ``table`` take in
    Arrow, plus ``per_row`` bytes a row (one statement: a count, and the lengths of the
    variable-width columns)."""
    fixed = sum(width(t) or 0 for _, t in columns)
    variable = [(n, t) for n, t in columns if width(t) is None]
    sums = [variable_bytes_sql(n, t) for n, t in variable]
    row = con.execute(f"SELECT count(*){''.join(', ' + s for s in sums)} FROM {table}").fetchall()
    rows = int(row[0][0])
    offsets = 8 * len(variable)
    return rows * (fixed + offsets + per_row) + sum(int(v) for v in row[0][1:])


def rows_bytes(rows: int, columns: Sequence[tuple[str, str]]) -> int:
    """A lower bound of the Arrow bytes of ``rows`` rows of ``columns`` (variable-width
    values counted at 8 bytes: their offsets and a few characters)."""
    return rows * sum(width(t) or 8 for _, t in columns)


__all__ = [
    "APPLY_BYTES_PER_ROW",
    "DEFAULT_FRACTION",
    "MemoryBudget",
    "default_limit",
    "describe",
    "estimate_bytes",
    "machine_memory",
    "parse_limit",
    "rows_bytes",
    "spill_directory",
    "task_default_limit",
]
